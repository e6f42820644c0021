"""torch.my_asic device queries and selection, and the generic torch.accelerator API on top."""

import json

import pytest
import torch

from device_subprocess import last_line, run_python

pytestmark = pytest.mark.usefixtures("device_count")


def test_is_available():
    assert torch.my_asic.is_available()


def test_device_count_and_names_follow_runtime_configuration():
    out = run_python(
        """
        import json, torch, kernel_pytorch
        print(json.dumps([torch.my_asic.device_count(),
                          [torch.my_asic.get_device_name(i) for i in range(torch.my_asic.device_count())]]))
        """,
        env={"MY_ASIC_DEVICE_COUNT": "3", "MY_ASIC_DEVICE_NAMES": "alpha,beta,gamma"},
    )
    assert json.loads(last_line(out)) == [3, ["alpha", "beta", "gamma"]]


def test_an_old_device_variable_name_still_works_with_a_deprecation_warning():
    out = run_python(
        """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch, kernel_pytorch
        print([str(w.message) for w in caught if w.category is DeprecationWarning])
        print(torch.my_asic.device_count())
        """,
        env={"MYASIC_DEVICE_COUNT": "3"},
    )
    warned, count = out.strip().splitlines()[-2:]
    assert "environment variable MYASIC_DEVICE_COUNT is deprecated; set MY_ASIC_DEVICE_COUNT instead" in warned
    assert count == "3"


def test_device_properties_report_capacity_in_bytes():
    props = torch.my_asic.get_device_properties(0)
    _, total_bytes = torch.my_asic.mem_get_info(0)
    assert props.total_memory == total_bytes
    assert props.name == torch.my_asic.get_device_name(0)
    assert props.multi_processor_count > 0


def test_set_device_changes_where_unindexed_tensors_go(two_devices):
    torch.my_asic.set_device(1)
    assert torch.my_asic.current_device() == 1
    assert torch.empty(1, device="my_asic").device == two_devices[1]


def test_device_context_restores_previous_device(two_devices):
    with torch.my_asic.device(1):
        assert torch.my_asic.current_device() == 1
    assert torch.my_asic.current_device() == 0


def test_device_of_makes_tensor_device_current(two_devices):
    tensor = torch.ones(1, device=two_devices[1])
    with torch.my_asic.device_of(tensor):
        assert torch.my_asic.current_device() == 1
    assert torch.my_asic.current_device() == 0


def test_set_device_rejects_other_device_types():
    with pytest.raises(ValueError, match="expected a my_asic device, got cpu"):
        torch.my_asic.set_device("cpu")


def test_amp_supported_dtypes_are_half_and_bfloat16():
    assert torch.my_asic.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]


def test_accelerator_is_my_asic():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("my_asic")
    assert torch.accelerator.device_count() == torch.my_asic.device_count()


def test_accelerator_set_device_index_sets_my_asic_device(two_devices):
    torch.accelerator.set_device_index(1)
    assert torch.my_asic.current_device() == 1
    assert torch.accelerator.current_device_index() == 1


def test_accelerator_current_stream_is_my_asic_current_stream():
    side = torch.my_asic.Stream()
    with torch.my_asic.stream(side):
        assert torch.accelerator.current_stream() == side


def test_accelerator_memory_allocated_matches_my_asic():
    tensor = torch.empty(1024, device="my_asic")
    assert torch.accelerator.memory_allocated(0) == torch.my_asic.memory_allocated(0)
    del tensor
