"""Specification of distributed_scale.HardwareAdapter (HAL mode and legacy mode).

The CPU is discovered for real. Vendors this machine lacks are represented by
RecordedAdapter, a fake at the hardware boundary returning hand-written
device descriptions whose "live" free memory a test can change.
"""

import pytest
import torch

import kernel_pytorch  # noqa: F401  (registers torch.my_asic when the extension is built)
from kernel_pytorch.distributed_scale import HardwareAdapter
from kernel_pytorch.hardware_abstraction import (
    DeviceSpec,
    HardwareAbstractionLayer,
    HardwareCapabilities,
    HardwareVendor,
    VendorAdapter,
)
from kernel_pytorch.hardware_abstraction.vendor_adapters.cpu import CpuAdapter

from hal_test_support import requires_my_asic  # noqa: E402


class RecordedAdapter(VendorAdapter):
    """Fake vendor adapter: fixed device descriptions; ``live_free_gb`` plays the driver's live figure."""

    def __init__(self, vendor, count=0, live_free_gb=70.0, bf16=989.4, reason="no devices (recorded)"):
        super().__init__()
        self.vendor = HardwareVendor(vendor)
        self.count = count
        self.live_free_gb = live_free_gb
        self.bf16 = bf16
        self.reason = reason
        self.discover_calls = 0

    def discover_devices(self):
        self.discover_calls += 1
        self._unavailable_reason = None if self.count else self.reason
        return [self._spec(i) for i in range(self.count)]

    def refresh_memory(self, spec):
        spec.capabilities.memory_free_gb = self.live_free_gb

    def _spec(self, index):
        usable = self.vendor is not HardwareVendor.OPENCL
        caps = HardwareCapabilities(
            device_name=f"recorded {self.vendor.value} {index}",
            vendor=self.vendor,
            architecture="recorded",
            compute_capability=None,
            memory_total_gb=80.0,
            memory_free_gb=self.live_free_gb,
            compute_units=100,
            clock_mhz=1500.0,
            peak_tflops={"bf16": self.bf16, "fp32": self.bf16 / 8},
            supported_dtypes=["bf16", "fp32"],
        )
        device = torch.device("cuda", index) if usable else torch.device("cpu")
        return DeviceSpec(self.vendor, index, device, caps, torch_usable=usable)


def hal_adapter(*adapters):
    return HardwareAdapter(enable_hal=True, hal=HardwareAbstractionLayer(list(adapters)))


# ------------------------------------------------------------------ modes


def test_hal_mode_is_opt_in():
    assert HardwareAdapter(enable_hal=True, hal=HardwareAbstractionLayer([CpuAdapter()])).is_hal_enabled()
    assert not HardwareAdapter().is_hal_enabled()


@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.get_optimal_device_hal(8, 20),
        lambda a: a.explain_device_selection(8, 20),
        lambda a: a.get_cross_vendor_capabilities(),
        lambda a: a.refresh(),
        lambda a: a.place_workload(2),
        lambda a: a.hal,
        lambda a: a.devices,
    ],
)
def test_hal_methods_with_hal_off_raise_a_clear_error(call):
    with pytest.raises(RuntimeError, match=r"HAL is disabled; construct HardwareAdapter\(enable_hal=True\)"):
        call(HardwareAdapter())


def test_passing_a_hal_with_hal_off_is_an_error():
    with pytest.raises(ValueError, match="pass enable_hal=True"):
        HardwareAdapter(hal=HardwareAbstractionLayer([CpuAdapter()]))


# ------------------------------------------------------------------ selection


def test_optimal_device_is_none_when_no_preferred_vendor_is_present():
    adapter = hal_adapter(RecordedAdapter("nvidia"), CpuAdapter())
    assert adapter.get_optimal_device_hal(8, 20, preferred_vendors=["nvidia", "amd", "intel"]) is None


def test_optimal_device_falls_through_the_preference_list_to_the_cpu():
    adapter = hal_adapter(CpuAdapter())
    cpu_bf16 = adapter.devices[0].capabilities.peak_tflops_for("bf16")
    chosen = adapter.get_optimal_device_hal(0.5, cpu_bf16 / 2, preferred_vendors=["custom_asic", "cpu"])
    assert chosen is not None and chosen.vendor is HardwareVendor.CPU


def test_optimal_device_prefers_the_first_listed_vendor_that_fits():
    adapter = hal_adapter(RecordedAdapter("amd", count=1, live_free_gb=190.0), RecordedAdapter("nvidia", count=1, live_free_gb=70.0))
    chosen = adapter.get_optimal_device_hal(8, 20, preferred_vendors=["nvidia", "amd"])
    assert chosen.vendor is HardwareVendor.NVIDIA


def test_compute_requirement_applies_to_the_requested_dtype():
    adapter = hal_adapter(RecordedAdapter("nvidia", count=1, bf16=400.0))  # fp32 peak 50
    assert adapter.get_optimal_device_hal(8, 100, dtype=torch.bfloat16) is not None
    assert adapter.get_optimal_device_hal(8, 100, dtype="fp32") is None


def test_explanation_names_the_reason_each_device_was_rejected():
    adapter = hal_adapter(RecordedAdapter("nvidia", count=1, live_free_gb=4.0))
    (verdict,) = adapter.explain_device_selection(8, 20)
    assert verdict.reasons == ("free memory 4.00 GB < required 8 GB (short by 4.00 GB)",)


def test_discovery_is_cached_across_calls():
    nvidia = RecordedAdapter("nvidia", count=2)
    adapter = hal_adapter(nvidia)
    for _ in range(3):
        adapter.get_optimal_device_hal(8, 20)
    adapter.get_cross_vendor_capabilities()
    assert nvidia.discover_calls == 1


def test_cached_selection_sees_new_free_memory_only_after_refresh():
    nvidia = RecordedAdapter("nvidia", count=1, live_free_gb=70.0)
    adapter = hal_adapter(nvidia)
    assert adapter.get_optimal_device_hal(40, 20) is not None
    nvidia.live_free_gb = 10.0  # another process filled the GPU
    assert adapter.get_optimal_device_hal(40, 20) is not None  # cached figure
    adapter.refresh()
    assert adapter.get_optimal_device_hal(40, 20) is None
    assert nvidia.discover_calls == 1  # refresh re-read memory without re-discovery


# ------------------------------------------------------------------ capabilities


def test_cross_vendor_capabilities_summarise_every_device():
    adapter = hal_adapter(RecordedAdapter("nvidia", count=2, live_free_gb=70.0), RecordedAdapter("amd"), CpuAdapter())
    caps = adapter.get_cross_vendor_capabilities()
    cpu_free = adapter.devices[2].capabilities.memory_free_gb
    assert caps["vendor_distribution"] == {"nvidia": 2, "cpu": 1}
    assert [d["device"] for d in caps["cross_vendor_devices"]] == ["cuda:0", "cuda:1", "cpu"]
    assert caps["available_memory_gb"] == pytest.approx(140.0 + cpu_free)
    assert caps["total_peak_tflops"]["bf16"] == pytest.approx(2 * 989.4 + adapter.devices[2].capabilities.peak_tflops["bf16"])
    assert caps["unavailable_vendors"] == {"amd": "no devices (recorded)"}


def test_memory_of_devices_torch_cannot_use_is_not_counted_as_available():
    adapter = hal_adapter(RecordedAdapter("opencl", count=1, live_free_gb=20.0), RecordedAdapter("nvidia", count=1, live_free_gb=70.0))
    caps = adapter.get_cross_vendor_capabilities()
    assert caps["vendor_distribution"] == {"opencl": 1, "nvidia": 1}
    assert caps["available_memory_gb"] == pytest.approx(70.0)


@requires_my_asic
def test_simulated_devices_add_no_memory_beyond_the_hosts():
    # The simulated my_asic devices keep their memory in host RAM, which the CPU's figure
    # already counts: the total is the host's, however large the simulated capacity.
    from kernel_pytorch.hardware_abstraction.vendor_adapters import CustomAsicAdapter

    adapter = hal_adapter(CustomAsicAdapter(), CpuAdapter())
    caps = adapter.get_cross_vendor_capabilities()
    cpu = next(s for s in adapter.devices if s.vendor is HardwareVendor.CPU).capabilities
    assert caps["available_memory_gb"] == pytest.approx(cpu.memory_free_gb, rel=0.05)
    assert caps["total_memory_gb"] == pytest.approx(cpu.memory_total_gb)
    rows = [d for d in caps["cross_vendor_devices"] if d["simulated"]]
    assert rows and all(d["shares_host_memory"] for d in rows)


@requires_my_asic
def test_a_simulated_device_is_never_reported_with_more_free_memory_than_the_host_has():
    from kernel_pytorch.hardware_abstraction.vendor_adapters import CustomAsicAdapter

    host_total, host_free, _ = CpuAdapter()._memory_gb()
    for spec in CustomAsicAdapter().discover_devices():
        assert spec.capabilities.memory_free_gb <= host_free * 1.05
        assert "host" in spec.capabilities.details["memory_source"]


def test_real_devices_memory_adds_to_the_hosts():
    adapter = hal_adapter(RecordedAdapter("nvidia", count=1, live_free_gb=70.0), CpuAdapter())
    caps = adapter.get_cross_vendor_capabilities()
    cpu = adapter.devices[1].capabilities
    assert caps["total_memory_gb"] == pytest.approx(80.0 + cpu.memory_total_gb)


# ------------------------------------------------------------------ placement


def test_placement_helpers_use_the_discovered_devices():
    adapter = hal_adapter(RecordedAdapter("nvidia", count=2))
    assert [a.device.index for a in adapter.place_workload(4)] == [0, 0, 1, 1]
    assert [s.device.index for s in adapter.place_model_stages([10.0, 10.0])] == [0, 1]
    (mesh,) = adapter.device_mesh_description()
    assert mesh.device_type == "cuda" and mesh.mesh_shape == (2,)


# ------------------------------------------------------------------ legacy mode


def test_legacy_placement_lists_the_cpu_last_when_it_has_the_memory():
    devices = HardwareAdapter().get_optimal_device_placement(memory_gb=0.01, compute_tflops=10)
    assert devices[-1] == torch.device("cpu")
    assert all(isinstance(d, torch.device) for d in devices)


def test_legacy_placement_is_empty_when_nothing_has_the_memory():
    assert HardwareAdapter().get_optimal_device_placement(memory_gb=1e9, compute_tflops=0) == []


def test_legacy_placement_keeps_working_in_hal_mode():
    adapter = hal_adapter(CpuAdapter())
    assert adapter.get_optimal_device_placement(0.01, 0)[-1] == torch.device("cpu")


def test_legacy_placement_rejects_negative_requirements():
    with pytest.raises(ValueError, match="compute_tflops must be a number >= 0"):
        HardwareAdapter().get_optimal_device_placement(8, -1)


@requires_my_asic
def test_legacy_placement_ranks_my_asic_devices_before_the_cpu():
    devices = HardwareAdapter().get_optimal_device_placement(memory_gb=1, compute_tflops=0)
    # Other accelerators (a CUDA GPU) may rank too; every my_asic device comes before the CPU, which is last.
    assert sorted(d.index for d in devices if d.type == "my_asic") == list(range(torch.my_asic.device_count()))
    assert devices[-1] == torch.device("cpu")


# ------------------------------------------------------------------ recorded real hardware


def recorded_h200_machine(recorded_nvml):
    """The real NvidiaAdapter reading NVML output recorded on a 2x H200 machine, plus this CPU."""
    from kernel_pytorch.hardware_abstraction.vendor_adapters.nvidia import NvidiaAdapter

    nvidia = NvidiaAdapter(nvml=recorded_nvml, cuda_visible_devices=None, use_torch_fallback=False)
    return hal_adapter(nvidia, CpuAdapter())


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs a torch build without CUDA")
def test_recorded_h200s_are_rejected_only_because_this_torch_cannot_use_them(recorded_h200_nvml):
    adapter = recorded_h200_machine(recorded_h200_nvml)
    assert adapter.get_optimal_device_hal(8, 20, preferred_vendors=["nvidia", "amd", "intel"]) is None
    h200_verdicts = [v for v in adapter.explain_device_selection(8, 20, ["nvidia"]) if v.device.vendor is HardwareVendor.NVIDIA]
    assert len(h200_verdicts) == 2
    for verdict in h200_verdicts:
        assert verdict.reasons == ("torch cannot use this device (no backend for it in this torch build)",)
        assert verdict.memory_headroom_gb > 100 and verdict.peak_tflops > 900


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs a torch build without CUDA")
def test_workers_avoid_recorded_gpus_this_torch_cannot_use(recorded_h200_nvml):
    adapter = recorded_h200_machine(recorded_h200_nvml)
    assert {a.device.vendor for a in adapter.place_workload(4)} == {HardwareVendor.CPU}
    assert [m.device_type for m in adapter.device_mesh_description()] == ["cpu"]
