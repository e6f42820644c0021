"""Specification of the HAL core types: vendors, precisions, capabilities, the HAL itself."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import pytest
import torch

from kernel_pytorch.hardware_abstraction import (
    PRECISIONS,
    DeviceSpec,
    HardwareAbstractionLayer,
    HardwareCapabilities,
    HardwareVendor,
    VendorAdapter,
    precision_key,
)
from kernel_pytorch.hardware_abstraction.vendor_adapters import (
    CpuAdapter,
    OpenCLAdapter,
    auto_detect_best_adapter,
    default_adapters,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text, vendor", [
    ("nvidia", HardwareVendor.NVIDIA), ("CUDA", HardwareVendor.NVIDIA),
    ("rocm", HardwareVendor.AMD), ("HIP", HardwareVendor.AMD), ("amd", HardwareVendor.AMD),
    ("xpu", HardwareVendor.INTEL), ("mps", HardwareVendor.APPLE),
    ("my_asic", HardwareVendor.CUSTOM_ASIC), ("asic", HardwareVendor.CUSTOM_ASIC),
    ("custom", HardwareVendor.CUSTOM_ASIC), ("Custom_ASIC", HardwareVendor.CUSTOM_ASIC),
    ("cpu", HardwareVendor.CPU), ("opencl", HardwareVendor.OPENCL),
])
def test_vendor_parse_accepts_names_and_torch_device_types(text, vendor):
    assert HardwareVendor.parse(text) is vendor


def test_vendor_values_are_lower_case_strings():
    assert all(v.value == v.value.lower() for v in HardwareVendor)
    assert HardwareVendor.NVIDIA == "nvidia"


def test_vendor_parse_rejects_unknown_name_listing_valid_ones():
    with pytest.raises(ValueError, match="unknown hardware vendor 'tpu'.*cuda.*nvidia"):
        HardwareVendor.parse("tpu")


@pytest.mark.parametrize("dtype, key", [
    (torch.float64, "fp64"), (torch.float32, "fp32"), (torch.float16, "fp16"),
    (torch.bfloat16, "bf16"), ("bfloat16", "bf16"), ("bf16", "bf16"), ("torch.bfloat16", "bf16"),
    (torch.float8_e4m3fn, "fp8"), (torch.float8_e5m2, "fp8"), (torch.int8, "int8"),
    ("tf32", "tf32"), ("half", "fp16"),
])
def test_precision_key_maps_dtypes_and_names_to_canonical_keys(dtype, key):
    assert precision_key(dtype) == key
    assert key in PRECISIONS


@pytest.mark.parametrize("bad", [torch.complex64, "float4", torch.bool])
def test_precision_key_rejects_dtypes_without_a_precision_class(bad):
    with pytest.raises(ValueError, match="no precision class"):
        precision_key(bad)


def _caps(**overrides) -> HardwareCapabilities:
    fields = dict(device_name="test device", vendor="cpu", architecture="x86-64 AVX2",
                  compute_capability=None, memory_total_gb=8.0, memory_free_gb=6.0,
                  compute_units=4, clock_mhz=3000.0, peak_tflops={"fp32": 0.4, "bf16": 0.4},
                  supported_dtypes=["fp32", "bf16", "int8"])
    fields.update(overrides)
    return HardwareCapabilities(**fields)


def test_capabilities_answer_peak_for_torch_dtypes():
    caps = _caps()
    assert caps.peak_tflops_for(torch.bfloat16) == 0.4
    assert caps.peak_is_theoretical


def test_capabilities_peak_is_none_for_unsupported_or_unknown_rate():
    caps = _caps()
    assert caps.peak_tflops_for(torch.float64) is None   # not supported
    assert caps.peak_tflops_for(torch.int8) is None      # supported, rate unknown


def test_capabilities_reject_non_canonical_precision_keys():
    with pytest.raises(ValueError, match="not canonical.*precision_key"):
        _caps(peak_tflops={"bfloat16": 1.0})


def test_capabilities_parse_vendor_strings():
    assert _caps(vendor="cuda").vendor is HardwareVendor.NVIDIA


class _ListedAdapter(VendorAdapter):
    """A real VendorAdapter subclass serving a fixed device list (adapter boundary)."""

    vendor = HardwareVendor.CUSTOM_ASIC

    def __init__(self, free_gb: List[float]):
        super().__init__()
        self.free_gb = free_gb
        self.discoveries = 0

    def discover_devices(self) -> List[DeviceSpec]:
        self.discoveries += 1
        if not self.free_gb:
            self._unavailable_reason = "nothing plugged in"
            return []
        self._unavailable_reason = None
        return [DeviceSpec(self.vendor, i, torch.device("cpu"),
                           _caps(vendor=self.vendor, memory_free_gb=free))
                for i, free in enumerate(self.free_gb)]


def test_hal_discovers_once_and_caches():
    adapter = _ListedAdapter([4.0, 5.0])
    hal = HardwareAbstractionLayer([adapter])
    assert [d.index for d in hal.discover()] == [0, 1]
    assert hal.devices == hal.discover()
    assert adapter.discoveries == 1


def test_hal_discover_refresh_reenumerates():
    adapter = _ListedAdapter([4.0])
    hal = HardwareAbstractionLayer([adapter])
    hal.discover()
    adapter.free_gb = [4.0, 2.0]
    assert len(hal.discover(refresh=True)) == 2


def test_hal_refresh_rereads_free_memory_of_known_devices():
    adapter = _ListedAdapter([4.0])
    hal = HardwareAbstractionLayer([adapter])
    spec = hal.discover()[0]
    adapter.free_gb = [1.5]
    assert hal.refresh()[0] is spec
    assert spec.capabilities.memory_free_gb == 1.5


def test_hal_refresh_rediscovers_when_a_device_disappeared():
    adapter = _ListedAdapter([4.0, 3.0])
    hal = HardwareAbstractionLayer([adapter])
    hal.discover()
    adapter.free_gb = [4.0]
    assert len(hal.refresh()) == 1


def test_hal_groups_devices_by_vendor_and_reports_why_vendors_are_missing():
    present, absent = _ListedAdapter([4.0]), _ListedAdapter([])
    absent.vendor = HardwareVendor.AMD
    hal = HardwareAbstractionLayer([present, absent])
    assert list(hal.devices_by_vendor()) == [HardwareVendor.CUSTOM_ASIC]
    assert hal.unavailable_vendors() == {HardwareVendor.AMD: "nothing plugged in"}


def test_hal_rejects_objects_that_are_not_adapters():
    with pytest.raises(TypeError, match="must be VendorAdapter instances"):
        HardwareAbstractionLayer([object()])


def test_adapter_refuses_to_refresh_another_vendors_device():
    spec = _ListedAdapter([4.0]).discover_devices()[0]
    with pytest.raises(ValueError, match="CpuAdapter refreshes cpu devices"):
        CpuAdapter().refresh_memory(spec)


def test_default_hal_finds_the_cpu_on_every_machine():
    hal = HardwareAbstractionLayer()
    assert HardwareVendor.CPU in hal.devices_by_vendor()


def test_default_adapters_cover_every_vendor_once():
    assert sorted(a.vendor.value for a in default_adapters()) == sorted(v.value for v in HardwareVendor)


def test_auto_detect_picks_highest_bf16_peak_and_never_returns_none():
    assert isinstance(auto_detect_best_adapter([OpenCLAdapter()]), CpuAdapter)
    cpu = CpuAdapter()
    assert auto_detect_best_adapter([cpu]) is cpu


def test_auto_detect_skips_devices_torch_cannot_use():
    # OpenCL devices are not torch-usable, so the CPU wins even listed after them.
    cpu = CpuAdapter()
    assert auto_detect_best_adapter([OpenCLAdapter(), cpu]) is cpu


def test_import_and_discovery_load_no_vendor_runtime_and_create_no_cuda_context():
    # torch itself may import pynvml at `import torch`; what matters is what the HAL adds.
    script = textwrap.dedent("""
        import sys, torch
        vendor_roots = {'pynvml', 'amdsmi', 'intel_extension_for_pytorch', 'pyopencl'}
        def vendor_modules():
            return {m for m in sys.modules if m.split('.')[0] in vendor_roots}
        before = vendor_modules()
        import kernel_pytorch.hardware_abstraction as h
        h.HardwareAbstractionLayer().discover()
        print(sorted(vendor_modules() - before))
        print(torch.cuda.is_initialized())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120, check=True)
    added, cuda_initialised = result.stdout.split("\n")[:2]
    assert cuda_initialised == "False"
    if not os.path.exists("/proc/driver/nvidia/version"):
        assert added == "[]"
    else:  # with an NVIDIA driver, NVML is the intended discovery path
        assert added in ("[]", "['pynvml']")


def test_importing_the_package_stays_cheap():
    script = ("import sys, torch; import kernel_pytorch.hardware_abstraction; "
              "print(sorted(m for m in sys.modules if 'vendor_adapters' in m or 'peak_flops' in m))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120, check=True)
    assert result.stdout.strip() == "[]"
