"""The CPU fallback: ops without a native my_asic kernel run their CPU kernel.

With host-addressable memory (this process) the CPU kernel runs directly on
device memory; with MY_ASIC_HOST_ADDRESSABLE=0 (a subprocess) arguments are
copied through the runtime. Both must give the CPU's results. The fallback is
observable (fallback_stats) and can be made to warn or raise.
"""

import json

import pytest
import torch

from device_subprocess import last_line, run_python, run_python_process
from kernel_pytorch import asic
from op_cases import CASES

pytestmark = pytest.mark.usefixtures("device_count")

MiB = 1 << 20


def test_in_place_op_on_view_mutates_base(host_addressable):
    base = torch.zeros(2, 3, device="my_asic")
    base[1].add_(4.0)
    assert base.cpu().tolist() == [[0.0, 0.0, 0.0], [4.0, 4.0, 4.0]]


def test_in_place_op_writes_the_tensors_own_device_memory(host_addressable):
    tensor = torch.zeros(8, device="my_asic")
    address = tensor.data_ptr()
    tensor.add_(1.0)
    assert tensor.data_ptr() == address
    assert tensor.cpu().tolist() == [1.0] * 8


def test_fallback_result_is_allocated_in_device_memory(host_addressable):
    source = torch.ones(MiB // 4, device="my_asic")  # 1 MiB of float32
    before = torch.my_asic.memory_allocated()
    result = source.sin()
    assert result.device.type == "my_asic"
    assert torch.my_asic.memory_allocated() == before + MiB


def test_fallback_counts_calls_per_op(fallback_counts):
    tensor = torch.ones(4, device="my_asic")
    tensor.tan()
    tensor.tan()
    tensor.erfinv()
    counts = fallback_counts()
    assert counts["aten::tan"] == 2
    assert counts["aten::erfinv"] == 1


def test_views_and_copies_do_not_fall_back(fallback_counts):
    tensor = torch.empty(4, 6, device="my_asic")
    tensor.copy_(torch.ones(4, 6))
    tensor.view(24)
    tensor[1:, ::2]
    tensor.t()
    tensor.to("cpu")
    assert fallback_counts() == {}


def test_reset_fallback_stats_forgets_counts(fallback_counts):
    torch.ones(2, device="my_asic").tan()
    asic.reset_fallback_stats()
    assert asic.fallback_stats() == {}


def test_raise_mode_rejects_ops_without_native_kernel():
    tensor = torch.ones(2, device="my_asic")
    asic.set_fallback_mode("raise")
    with pytest.raises(NotImplementedError, match="no native kernel for 'aten::tan.*MY_ASIC_FALLBACK=raise"):
        tensor.tan()


def test_raise_mode_still_allows_native_copies_and_views():
    tensor = torch.empty(2, 2, device="my_asic")
    asic.set_fallback_mode("raise")
    tensor.copy_(torch.eye(2))
    assert tensor.t().cpu().tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_unknown_fallback_mode_is_rejected():
    with pytest.raises(ValueError, match="fallback mode must be one of"):
        asic.set_fallback_mode("loud")


def test_env_warn_mode_warns_once_per_op():
    out = run_python(
        """
        import warnings, torch, kernel_pytorch
        tensor = torch.ones(2, device="my_asic")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tensor.tan(); tensor.tan(); tensor.erfinv()
        messages = [str(w.message) for w in caught if "CPU fallback" in str(w.message)]
        print(len(messages), any("aten::tan" in m for m in messages), any("aten::erfinv" in m for m in messages))
        """,
        env={"MY_ASIC_FALLBACK": "warn"},
    )
    assert last_line(out) == "2 True True"


def test_env_raise_mode_raises_not_implemented():
    completed = run_python_process(
        """
        import torch, kernel_pytorch
        torch.zeros(2, device="my_asic").tan()
        """,
        env={"MY_ASIC_FALLBACK": "raise"},
    )
    assert completed.returncode != 0
    assert "NotImplementedError" in completed.stderr
    assert "MY_ASIC_FALLBACK=raise" in completed.stderr


def test_env_unknown_mode_warns_and_allows():
    completed = run_python_process(
        """
        import torch, kernel_pytorch
        print(torch.ones(2, device="my_asic").exp().sum().item() > 0, kernel_pytorch.asic.get_fallback_mode())
        """,
        env={"MY_ASIC_FALLBACK": "loud"},
    )
    assert completed.returncode == 0, completed.stderr
    assert last_line(completed.stdout) == "True allow"
    assert "MY_ASIC_FALLBACK='loud' is not one of allow, warn, raise" in completed.stderr


@pytest.fixture(scope="module")
def op_report_without_host_access():
    """{op case: problem or None} from running op_cases.py with MY_ASIC_HOST_ADDRESSABLE=0."""
    out = run_python(
        """
        import sys, torch, kernel_pytorch
        sys.path.insert(0, "tests/asic")
        assert not torch.my_asic.get_device_properties(0).host_addressable
        import op_cases
        # The simulator's random entry draws the device's own sequences there.
        op_cases.report_all_cases("my_asic", device_generator=True)
        """,
        env={"MY_ASIC_HOST_ADDRESSABLE": "0"},
    )
    return json.loads(last_line(out))


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_without_host_access_matches_cpu(op_report_without_host_access, name):
    assert op_report_without_host_access[name] is None, f"{name}: {op_report_without_host_access[name]}"
