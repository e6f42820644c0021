"""torch.accelerator.get_device_capability() for my_asic devices."""

import pytest
import torch

pytestmark = pytest.mark.usefixtures("two_devices")

QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


# ("my_asic", 1) stands for torch.device("my_asic", 1), built in the test: at
# collection my_asic may not be registered (beside a GPU without MY_ASIC_ENABLE).
@pytest.mark.parametrize("device", ["my_asic:0", "my_asic:1", ("my_asic", 1)])
def test_capability_lists_the_dtypes_my_asic_tensors_support(device):
    if isinstance(device, tuple):
        device = torch.device(*device)
    dtypes = torch.accelerator.get_device_capability(device)["supported_dtypes"]
    assert {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64} <= dtypes
    for dtype in (torch.float16, torch.bfloat16, torch.complex64, torch.uint16):
        assert torch.zeros(2, dtype=dtype).to(device).cpu().dtype == dtype


def test_quantized_dtypes_are_not_claimed():
    # my_asic cannot create quantized tensors (no QuantizedPrivateUse1 kernels),
    # so the capability does not list them; CUDA in torch 2.13 reports no
    # capability at all, XPU and MPS list no quantized dtype either.
    dtypes = torch.accelerator.get_device_capability("my_asic")["supported_dtypes"]
    assert not QUANTIZED & dtypes


def test_quantizing_a_my_asic_tensor_is_refused_with_the_fix_instead_of_a_broken_tensor():
    x = torch.randn(3, device="my_asic")
    with pytest.raises(NotImplementedError, match=r"cannot hold quantized tensors: aten::quantize_per_tensor.*CPU"):
        torch.quantize_per_tensor(x, 0.1, 10, torch.qint8)
    assert (x + 1).device.type == "my_asic"  # the device stays usable


def test_capability_of_a_missing_device_names_the_valid_range():
    with pytest.raises(RuntimeError, match=r"invalid device index 5.*valid indices 0\.\.1"):
        torch.accelerator.get_device_capability("my_asic:5")
