"""Shared pieces of the HAL tests.

``fake_spec`` builds DeviceSpecs for hardware this machine lacks: fakes at the
hardware boundary, so the selection and placement code under test stays real.
"""

import pytest
import torch

from kernel_pytorch.hardware_abstraction.hal_core import DeviceSpec, HardwareCapabilities, HardwareVendor

requires_my_asic = pytest.mark.skipif(
    not hasattr(torch, "my_asic"), reason="kernel_pytorch my_asic extension not built/registered"
)

# privateuseone is my_asic once kernel_pytorch registers it; usable before that too.
TORCH_TYPE = {
    "nvidia": "cuda", "amd": "cuda", "intel": "xpu", "custom_asic": "privateuseone", "cpu": "cpu", "opencl": "cpu",
}


def fake_spec(vendor, index=0, free_gb=40.0, bf16=100.0, fp32=None, total_gb=None, torch_usable=True, name=None,
              simulated=False):
    """A described (not discovered) device: bf16/fp32 peaks in TFLOPS, memory in GB.

    fp32 defaults to a quarter of bf16 (1.0 without bf16); total memory to the free memory.
    """
    vendor = HardwareVendor(vendor)
    peaks = {}
    if bf16 is not None:
        peaks["bf16"] = bf16
    peaks["fp32"] = fp32 if fp32 is not None else (bf16 / 4 if bf16 is not None else 1.0)
    caps = HardwareCapabilities(
        device_name=name or f"fake {vendor.value} {index}",
        vendor=vendor,
        architecture="fake",
        compute_capability=None,
        memory_total_gb=total_gb if total_gb is not None else free_gb,
        memory_free_gb=free_gb,
        compute_units=8,
        clock_mhz=1000.0,
        peak_tflops=peaks,
        supported_dtypes=list(peaks),
        details={"simulated": True} if simulated else {},
    )
    device_type = TORCH_TYPE[vendor.value]
    device = torch.device(device_type) if device_type == "cpu" else torch.device(device_type, index)
    return DeviceSpec(vendor=vendor, index=index, device=device, capabilities=caps, torch_usable=torch_usable)
