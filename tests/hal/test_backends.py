"""Specification of the backend API (BackendPreference, discover/init_backend, memory check).

The CPU is discovered for real. Vendors this machine lacks are represented by
RecordedAdapter, a fake at the hardware boundary that returns a hand-written
device description (or nothing, with a recorded "unavailable" reason).
"""

import logging

import pytest
import torch

import kernel_pytorch  # noqa: F401  (registers torch.my_asic when the extension is built)
from kernel_pytorch.hardware_abstraction.backends import (
    BACKEND_PRIORITY,
    BackendPreference,
    InsufficientDeviceMemoryError,
    best_available_backend,
    discover_backends,
    format_backend_summary,
    init_backend,
    init_backend_with_memory_check,
    print_backend_summary,
    select_backend,
)
from kernel_pytorch.hardware_abstraction import (
    BYTES_PER_GB,
    DeviceSpec,
    HardwareAbstractionLayer,
    HardwareCapabilities,
    HardwareVendor,
    VendorAdapter,
)
from kernel_pytorch.hardware_abstraction.vendor_adapters.cpu import CpuAdapter

from hal_test_support import requires_my_asic  # noqa: E402
cpu_only_torch = pytest.mark.skipif(torch.version.cuda is not None, reason="needs a torch build without CUDA")


class RecordedAdapter(VendorAdapter):
    """Fake vendor adapter: reports fixed devices, or none with a recorded reason."""

    def __init__(self, vendor, specs=(), reason=None):
        super().__init__()
        self.vendor = HardwareVendor(vendor)
        self._specs = list(specs)
        self._reason = reason

    def discover_devices(self):
        self._unavailable_reason = None if self._specs else self._reason
        return list(self._specs)


def recorded_h100(index=0, free_gb=79.0):
    caps = HardwareCapabilities(
        device_name="NVIDIA H100 80GB HBM3 (recorded)",
        vendor=HardwareVendor.NVIDIA,
        architecture="hopper",
        compute_capability="9.0",
        memory_total_gb=85.0,
        memory_free_gb=free_gb,
        compute_units=132,
        clock_mhz=1830.0,
        peak_tflops={"fp32": 66.9, "bf16": 989.4},
        supported_dtypes=["fp32", "bf16"],
    )
    return DeviceSpec(HardwareVendor.NVIDIA, index, torch.device("cuda", index), caps)


def recorded_opencl_device():
    caps = HardwareCapabilities(
        device_name="pthread-cpu (recorded)",
        vendor=HardwareVendor.OPENCL,
        architecture="pocl",
        compute_capability=None,
        memory_total_gb=20.0,
        memory_free_gb=20.0,
        compute_units=2,
        clock_mhz=None,
        peak_tflops={},
    )
    return DeviceSpec(HardwareVendor.OPENCL, 0, torch.device("cpu"), caps, torch_usable=False)


def cpu_only_hal():
    return HardwareAbstractionLayer([RecordedAdapter("nvidia", reason="pynvml: NVML Shared Library Not Found"), CpuAdapter()])


def by_name(infos):
    return {info.name: info for info in infos}


def test_backends_are_listed_in_priority_order():
    assert [info.name for info in discover_backends(cpu_only_hal())] == list(BACKEND_PRIORITY)
    assert BACKEND_PRIORITY[0] is BackendPreference.CUDA and BACKEND_PRIORITY[-1] is BackendPreference.CPU


def test_a_vendor_without_devices_is_unavailable_with_the_adapters_reason():
    cuda = by_name(discover_backends(cpu_only_hal()))[BackendPreference.CUDA]
    assert not cuda.available
    assert cuda.reason == "pynvml: NVML Shared Library Not Found"


def test_a_vendor_the_hal_has_no_adapter_for_says_so():
    xpu = by_name(discover_backends(cpu_only_hal()))[BackendPreference.XPU]
    assert xpu.reason == "no intel adapter in this HardwareAbstractionLayer"


@cpu_only_torch
def test_a_gpu_found_by_the_vendor_library_is_not_offered_to_a_cpu_only_torch():
    hal = HardwareAbstractionLayer([RecordedAdapter("nvidia", [recorded_h100()]), CpuAdapter()])
    cuda = by_name(discover_backends(hal))[BackendPreference.CUDA]
    assert not cuda.available
    assert "has no CUDA support" in cuda.reason
    assert cuda.devices[0].name == "NVIDIA H100 80GB HBM3 (recorded)"
    assert init_backend("auto", hal) == torch.device("cpu")


def test_opencl_devices_are_listed_but_never_chosen():
    hal = HardwareAbstractionLayer([RecordedAdapter("opencl", [recorded_opencl_device()]), CpuAdapter()])
    opencl = by_name(discover_backends(hal))[BackendPreference.OPENCL]
    assert len(opencl.devices) == 1 and not opencl.available
    assert "no OpenCL backend" in opencl.reason
    assert init_backend(BackendPreference.OPENCL, hal) == torch.device("cpu")


def test_auto_on_a_cpu_only_machine_picks_the_cpu():
    assert init_backend(BackendPreference.AUTO, cpu_only_hal()) == torch.device("cpu")


def test_an_unavailable_explicit_preference_falls_back_and_records_why(caplog):
    with caplog.at_level(logging.INFO, logger="kernel_pytorch.hardware_abstraction.backends"):
        selection = select_backend("cuda", cpu_only_hal())
    assert selection.device == torch.device("cpu")
    assert selection.fell_back
    assert selection.skipped[0] == (BackendPreference.CUDA, "pynvml: NVML Shared Library Not Found")
    assert "backend cuda unavailable, falling back to cpu" in caplog.text
    assert "skipping backend cuda: pynvml: NVML Shared Library Not Found" in caplog.text


def test_strict_preference_raises_instead_of_falling_back():
    with pytest.raises(RuntimeError, match="backend cuda is not available .*NVML Shared Library Not Found.*strict=False"):
        init_backend("cuda", cpu_only_hal(), strict=True)


def test_best_available_backend_is_the_first_available_in_priority_order():
    best = best_available_backend(cpu_only_hal())
    assert best.name is BackendPreference.CPU and best.available


def test_a_hal_with_nothing_usable_is_a_clear_error():
    hal = HardwareAbstractionLayer([RecordedAdapter("nvidia", reason="no driver")])
    with pytest.raises(RuntimeError, match="no backend is available"):
        best_available_backend(hal)
    with pytest.raises(RuntimeError, match="no usable backend .*cuda: no driver"):
        init_backend("auto", hal)


def test_summary_marks_each_backend_and_recommends_one(capsys):
    print_backend_summary(cpu_only_hal())
    text = capsys.readouterr().out
    assert "\u2717 cuda    pynvml: NVML Shared Library Not Found" in text
    assert "\u2713 cpu     1 device(s)" in text
    assert " GB total, " in text and " GB free" in text
    assert text.rstrip().endswith("Recommended backend: cpu (cpu)")


def test_memory_check_returns_a_device_with_enough_free_memory():
    assert init_backend_with_memory_check("auto", 1024, cpu_only_hal()) == torch.device("cpu")


def test_memory_check_failure_reports_the_shortfall_in_bytes_and_gib():
    hal = cpu_only_hal()
    required = 10**15  # 1 PB: more than any host has free
    with pytest.raises(InsufficientDeviceMemoryError, match=r"short by \d+ bytes \(\d+\.\d\d GiB\)") as info:
        init_backend_with_memory_check("auto", required, hal)
    cpu_free_bytes = int(hal.devices[-1].capabilities.memory_free_gb * BYTES_PER_GB)
    assert info.value.required_bytes == required
    assert info.value.shortfall_bytes == pytest.approx(required - cpu_free_bytes, rel=1e-3)


def test_memory_check_falls_back_from_an_unavailable_preference():
    hal = HardwareAbstractionLayer([RecordedAdapter("custom_asic", reason="not built"), CpuAdapter()])
    assert init_backend_with_memory_check("custom", 1024, hal) == torch.device("cpu")


def test_memory_check_with_strict_preference_does_not_fall_back():
    hal = HardwareAbstractionLayer([RecordedAdapter("custom_asic", reason="not built"), CpuAdapter()])
    with pytest.raises(RuntimeError, match="backend custom is not available .custom: not built"):
        init_backend_with_memory_check("custom", 1024, hal, strict=True)


@requires_my_asic
def test_memory_check_skips_a_device_that_is_too_full_for_one_that_fits():
    almost_full = HardwareCapabilities(
        device_name="my_asic simulator (recorded, almost full)",
        vendor=HardwareVendor.CUSTOM_ASIC,
        architecture="myasic-sim",
        compute_capability=None,
        memory_total_gb=17.18,
        memory_free_gb=0.000001,  # 1000 bytes
        compute_units=16,
        clock_mhz=None,
        peak_tflops={"bf16": 1.0},
    )
    spec = DeviceSpec(HardwareVendor.CUSTOM_ASIC, 0, torch.device("my_asic", 0), almost_full)
    hal = HardwareAbstractionLayer([RecordedAdapter("custom_asic", [spec]), CpuAdapter()])
    assert init_backend("custom", hal).type == "my_asic"
    assert init_backend_with_memory_check("custom", 4096, hal) == torch.device("cpu")


def test_memory_check_rejects_a_non_integer_byte_count():
    with pytest.raises(ValueError, match="required_bytes must be a non-negative int"):
        init_backend_with_memory_check("auto", 8.5e9, cpu_only_hal())


def test_preference_parsing_is_case_insensitive_and_rejects_unknown_names():
    assert BackendPreference.parse("Auto") is BackendPreference.AUTO
    assert BackendPreference.parse("MY_ASIC") is BackendPreference.CUSTOM
    with pytest.raises(ValueError, match="unknown backend 'tpu'; use one of: auto, cpu, cuda"):
        BackendPreference.parse("tpu")


@requires_my_asic
def test_auto_prefers_a_real_device_over_the_simulated_my_asic_on_the_default_hal():
    # The bundled runtime simulates my_asic on this very CPU, with extra overhead;
    # a GPU, where there is one, comes first (CUDA leads BACKEND_PRIORITY).
    hal = HardwareAbstractionLayer()
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert init_backend("auto", hal).type == expected
    summary = format_backend_summary(hal)
    assert "simulated on the host CPU" in summary
    if expected == "cpu":
        assert summary.rstrip().endswith("Recommended backend: cpu (cpu)")


@requires_my_asic
def test_asking_for_my_asic_by_name_still_gets_the_simulator():
    assert init_backend("my_asic", HardwareAbstractionLayer(), strict=True).type == "my_asic"
