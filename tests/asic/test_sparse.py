"""Sparse COO and CSR tensors on my_asic behave as on the CPU.

The operations of sparse_cases.py run in a subprocess per memory mode (host
addressable or not), so a crash fails these tests loudly instead of killing
the test run; the behaviours around them (where the components live, what
counts as a fallback) run in process.
"""

import json

import pytest
import torch

from device_subprocess import last_line, run_python
from kernel_pytorch import asic
from sparse_cases import CASES

pytestmark = pytest.mark.usefixtures("device_count")

MEMORY_MODES = {"host_addressable": "1", "not_host_addressable": "0"}


@pytest.fixture(scope="module")
def sparse_reports():
    """{memory mode: {case: problem or None}} from running every case in a fresh process."""
    reports = {}
    for mode, flag in MEMORY_MODES.items():
        out = run_python(
            """
            import sys, torch, kernel_pytorch
            sys.path.insert(0, "tests/asic")
            import sparse_cases
            sparse_cases.report_all_cases("my_asic")
            """,
            env={"MY_ASIC_HOST_ADDRESSABLE": flag},
        )
        reports[mode] = json.loads(last_line(out))
    return reports


@pytest.mark.parametrize("mode", sorted(MEMORY_MODES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_sparse_operation_matches_cpu(sparse_reports, mode, name):
    problem = sparse_reports[mode][name]
    assert problem is None, f"{name} ({mode}): {problem}"


def _coo():
    indices = torch.tensor([[0, 1, 1], [2, 0, 2]])
    return torch.sparse_coo_tensor(indices, torch.tensor([3.0, 4.0, 5.0]), (2, 3), device="my_asic")


def test_coo_components_live_on_the_device():
    s = _coo()
    assert s.layout == torch.sparse_coo and s.device.type == "my_asic"
    assert s._indices().device.type == "my_asic" and s._values().device.type == "my_asic"
    assert s._nnz() == 3 and s.sparse_dim() == 2 and s.dense_dim() == 0


def test_csr_components_live_on_the_device():
    s = torch.eye(3, device="my_asic").to_sparse_csr()
    assert s.layout == torch.sparse_csr and s.device.type == "my_asic"
    assert all(t.device.type == "my_asic" for t in (s.crow_indices(), s.col_indices(), s.values()))
    assert s.crow_indices().cpu().tolist() == [0, 1, 2, 3]


def test_moving_a_sparse_tensor_keeps_its_entries():
    cpu = torch.eye(3).to_sparse()
    round_trip = cpu.to("my_asic").cpu()
    assert round_trip.layout == torch.sparse_coo
    assert torch.equal(round_trip.to_dense(), torch.eye(3))
    assert round_trip.is_coalesced()


def test_printing_a_sparse_tensor_names_the_device():
    assert "device='my_asic:0'" in repr(_coo())


def test_sparse_arithmetic_runs_on_the_counted_cpu_fallback():
    s = _coo()
    asic.reset_fallback_stats()
    s.coalesce()
    assert asic.fallback_stats().get("aten::_coalesce") == 1


def test_layout_kernels_are_not_fallbacks():
    asic.reset_fallback_stats()
    s = _coo()
    s._indices(), s._values(), s._nnz(), s.clone(), s.cpu()
    assert asic.fallback_stats() == {}


def test_raise_mode_names_the_sparse_op_that_would_fall_back():
    s, dense = _coo(), torch.ones(3, 2, device="my_asic")
    asic.set_fallback_mode("raise")
    with pytest.raises(NotImplementedError, match="aten::_sparse_mm|aten::addmm|aten::mm"):
        torch.sparse.mm(s, dense)
    assert s.clone()._nnz() == 3  # layout kernels keep working in raise mode


def test_sparse_and_dense_on_two_devices_are_rejected(two_devices):
    s = _coo().to(two_devices[0])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(s, torch.ones(3, 2, device=two_devices[1]))
