"""How my_asic becomes a torch device: naming, torch.my_asic, generated methods, autoload."""

import importlib.metadata

import pytest
import torch

import kernel_pytorch
from device_subprocess import last_line, run_python, run_python_process


def _autoload_entry_point_installed():
    return any(ep.name == "my_asic" for ep in importlib.metadata.entry_points(group="torch.backends"))


needs_installed_entry_point = pytest.mark.skipif(
    not _autoload_entry_point_installed(),
    reason="kernel_pytorch is not pip-installed, so torch has no 'my_asic' backend entry point",
)


def test_privateuse1_is_named_my_asic():
    assert torch._C._get_privateuse1_backend_name() == "my_asic"


def test_torch_my_asic_is_the_kernel_pytorch_device_module():
    assert torch.my_asic is kernel_pytorch.asic


def test_get_device_module_finds_torch_my_asic():
    assert torch.get_device_module("my_asic") is torch.my_asic


def test_device_strings_parse_as_my_asic():
    device = torch.device("my_asic:1")
    assert (device.type, device.index) == ("my_asic", 1)


def test_registering_twice_changes_nothing():
    kernel_pytorch.asic.registration.register_device()
    assert torch._C._get_privateuse1_backend_name() == "my_asic"
    assert torch.my_asic is kernel_pytorch.asic


def test_generated_tensor_method_moves_tensor_to_device(two_devices):
    moved = torch.arange(3).my_asic(1)
    assert moved.device == two_devices[1]
    assert moved.cpu().tolist() == [0, 1, 2]


def test_generated_is_my_asic_property_tells_device_tensors_apart(device_count):
    assert torch.ones(1, device="my_asic").is_my_asic
    assert not torch.ones(1).is_my_asic


def test_generated_module_method_moves_parameters_and_buffers(device_count):
    model = torch.nn.BatchNorm1d(3).my_asic()
    assert {p.device.type for p in model.parameters()} == {"my_asic"}
    assert {b.device.type for b in model.buffers()} == {"my_asic"}


def test_generated_storage_method_moves_storage(device_count):
    storage = torch.tensor([1.0, 2.0]).untyped_storage().my_asic()
    assert storage.device.type == "my_asic"
    assert storage.is_my_asic


def test_import_kernel_pytorch_before_torch_registers_device():
    out = run_python(
        """
        import kernel_pytorch
        import torch
        print(torch._C._get_privateuse1_backend_name(), torch.my_asic is kernel_pytorch.asic)
        """
    )
    assert last_line(out) == "my_asic True"


@needs_installed_entry_point
def test_plain_import_torch_autoloads_my_asic():
    out = run_python(
        """
        import sys, torch
        print(torch._C._get_privateuse1_backend_name(), "kernel_pytorch" in sys.modules,
              torch.ones(2, device="my_asic").device)
        """
    )
    assert last_line(out) == "my_asic True my_asic:0"


@needs_installed_entry_point
def test_autoload_env_zero_leaves_privateuse1_unclaimed():
    out = run_python(
        """
        import sys, torch
        print(torch._C._get_privateuse1_backend_name(), hasattr(torch, "my_asic"),
              "kernel_pytorch" in sys.modules)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert last_line(out) == "privateuseone False False"


def test_privateuse1_taken_by_another_name_is_a_clear_error():
    completed = run_python_process(
        """
        import torch
        torch.utils.rename_privateuse1_backend("other_npu")
        import kernel_pytorch
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert completed.returncode != 0
    assert "PrivateUse1 is already registered as 'other_npu'" in completed.stderr
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in completed.stderr
