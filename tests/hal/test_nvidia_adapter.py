"""NvidiaAdapter: NVML paths replayed from a real 2x H200 recording, plus the real thing
on a GPU machine.  The replay (tests/hal/recorded/nvml_h200_x2_nvlink.json) was captured
by tests/hal/recorded/record_nvml.py on two NVLink-connected H200s, driver 580.159.04."""

import os
import subprocess
import sys

import pytest
import torch

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.vendor_adapters import NvidiaAdapter
from kernel_pytorch.hardware_abstraction.vendor_adapters.nvidia import parse_cuda_visible_devices



def nvidia_gpu_present() -> bool:
    """The NVIDIA kernel driver is loaded (checked without pynvml or CUDA)."""
    return os.path.exists("/proc/driver/nvidia/version")

UUID_0 = "GPU-3b8ce41a-ff8c-71d6-4bdb-c4c1a64ec479"
UUID_1 = "GPU-72d3d5b6-cde2-ddb7-7632-e6ffdb654d86"


def _adapter(nvml, visible=None):
    return NvidiaAdapter(nvml=nvml, cuda_visible_devices=visible, use_torch_fallback=False)


def test_recorded_h200_is_described_from_nvml(recorded_h200_nvml):
    spec = _adapter(recorded_h200_nvml).discover_devices()[0]
    caps = spec.capabilities
    assert spec.vendor is HardwareVendor.NVIDIA and spec.device == torch.device("cuda", 0)
    assert (caps.device_name, caps.architecture, caps.compute_capability) == ("NVIDIA H200", "hopper", "9.0")
    assert caps.compute_units == 132  # 16896 CUDA cores / 128 per Hopper SM
    assert caps.memory_total_gb == pytest.approx(150.75, abs=0.01)
    assert caps.memory_free_gb == pytest.approx(150.11, abs=0.01)
    assert caps.details["uuid"] == UUID_0 and caps.details["driver_version"] == "580.159.04"


def test_recorded_h200_peak_uses_datasheet_clock_not_nvml_max_clock(recorded_h200_nvml):
    caps = _adapter(recorded_h200_nvml).discover_devices()[0].capabilities
    assert caps.clock_mhz == 1830  # NVML's max SM clock reads 1980
    assert caps.peak_tflops_for(torch.bfloat16) == pytest.approx(989.4, rel=0.01)
    assert caps.peak_tflops_for(torch.float8_e4m3fn) == pytest.approx(1978.9, rel=0.01)
    assert caps.peak_is_theoretical
    assert "datasheet" in caps.details["clock_source"]


def _recorded_as(replay, name):
    """The recorded 2x H200 under another product name (as NVML would report it)."""
    recording = replay.load("nvml_h200_x2_nvlink.json")
    for device in recording["devices"]:
        device["name"] = name
    return replay.RecordedNvml(recording)


def test_recorded_h200_fp32_and_fp64_use_the_boost_clock(recorded_h200_nvml):
    # NVIDIA quotes Hopper's CUDA-core rates at 1980 MHz: H200 SXM fp32 67 TF, fp64 tensor 67 TF.
    caps = _adapter(recorded_h200_nvml).discover_devices()[0].capabilities
    assert caps.peak_tflops_for(torch.float32) == pytest.approx(67.0, rel=0.01)
    assert caps.peak_tflops_for(torch.float64) == pytest.approx(67.0, rel=0.01)


def test_unlisted_product_does_not_overstate_tensor_peak(replay):
    # "NVIDIA Graphics Device" is what NVML reports for a GPU its driver has no name for.
    caps = _adapter(_recorded_as(replay, "NVIDIA Graphics Device")).discover_devices()[0].capabilities
    assert caps.peak_tflops_for(torch.bfloat16) == pytest.approx(989.4, rel=0.01)  # not 1070
    assert caps.peak_tflops_for(torch.float32) == pytest.approx(66.9, rel=0.01)    # boost clock
    assert caps.clock_mhz == pytest.approx(1830, abs=1)
    assert caps.details["clock_source"].startswith("estimated")
    assert "1980 MHz" in caps.details["clock_source"]


def test_gh200_is_not_labelled_h200(replay):
    caps = _adapter(_recorded_as(replay, "NVIDIA GH200 480GB")).discover_devices()[0].capabilities
    assert "GH200" in caps.details["clock_source"]
    assert "H200 SXM" not in caps.details["clock_source"]
    assert caps.peak_tflops_for(torch.bfloat16) == pytest.approx(989.4, rel=0.01)


def test_failing_max_clock_query_of_unlisted_gpu_leaves_discovery_working(replay):
    nvml = _recorded_as(replay, "NVIDIA Graphics Device")
    for device in nvml.devices:
        device["max_clock_sm_mhz"] = {"nvml_error": 3}  # NVML_ERROR_NOT_SUPPORTED
    specs = _adapter(nvml).discover_devices()
    assert len(specs) == 2
    caps = specs[0].capabilities
    assert caps.peak_tflops == {} and caps.clock_mhz is None
    assert caps.memory_total_gb == pytest.approx(150.75, abs=0.01)
    assert caps.details["unreadable"]["max SM clock"] == "nvmlDeviceGetMaxClockInfo: Not Supported"


@pytest.mark.parametrize("field, what", [
    ("memory", "memory info"), ("pci_bus_id", "PCI info"), ("num_gpu_cores", None),
    ("attributes", None), ("max_clock_sm_mhz", None),
])
def test_any_single_failing_query_still_describes_every_gpu(replay, field, what):
    nvml = replay.RecordedNvml(replay.load("nvml_h200_x2_nvlink.json"))
    nvml.devices[0][field] = {"nvml_error": 3}
    specs = _adapter(nvml).discover_devices()
    assert [s.capabilities.details["uuid"] for s in specs] == [UUID_0, UUID_1]
    assert specs[1].capabilities.details.get("unreadable") is None
    if what is not None:
        assert "Not Supported" in specs[0].capabilities.details["unreadable"][what]


def test_failing_sm_count_queries_leave_peak_unknown_and_say_why(replay):
    nvml = replay.RecordedNvml(replay.load("nvml_h200_x2_nvlink.json"))
    nvml.devices[0]["num_gpu_cores"] = {"nvml_error": 3}
    nvml.devices[0]["attributes"] = {"nvml_error": 3}
    caps = _adapter(nvml).discover_devices()[0].capabilities
    assert caps.peak_tflops == {}
    assert "SM count" in caps.details["unreadable"]
    assert caps.details["peak_source"] == "unavailable: SM count or clock unknown"


def test_gpu_nvml_cannot_open_is_skipped_and_reported(replay):
    class LostSecondGpu(replay.RecordedNvml):
        def nvmlDeviceGetHandleByIndex(self, index):
            if index == 1:
                raise replay.NVMLError(15)  # NVML_ERROR_GPU_IS_LOST
            return super().nvmlDeviceGetHandleByIndex(index)

    adapter = _adapter(LostSecondGpu(replay.load("nvml_h200_x2_nvlink.json")))
    (spec,) = adapter.discover_devices()
    assert spec.capabilities.details["uuid"] == UUID_0
    assert adapter.problems == ["NVML GPU 1 skipped: nvmlDeviceGetHandleByIndex: NVML Error with code 15"]


def test_nvlink_between_recorded_h200s_with_bandwidth_from_link_count(recorded_h200_nvml):
    first, second = _adapter(recorded_h200_nvml).discover_devices()
    (link,) = first.capabilities.links
    assert (link.peer_index, link.kind) == (1, "nvlink")
    assert link.bandwidth_gbps == 450.0  # 18 active NVLink 4 links x 25 GB/s per direction
    assert second.capabilities.links[0].peer_index == 0


def test_cuda_visible_devices_index_renumbers_from_zero(recorded_h200_nvml):
    (spec,) = _adapter(recorded_h200_nvml, visible="1").discover_devices()
    assert spec.index == 0 and spec.device == torch.device("cuda", 0)
    assert spec.capabilities.details["uuid"] == UUID_1
    assert spec.capabilities.details["nvml_index"] == 1


def test_cuda_visible_devices_uuid_prefix_and_order(recorded_h200_nvml):
    specs = _adapter(recorded_h200_nvml, visible="GPU-72d3d5b6,GPU-3b8c").discover_devices()
    assert [s.capabilities.details["uuid"] for s in specs] == [UUID_1, UUID_0]
    assert [s.index for s in specs] == [0, 1]


def test_cuda_visible_devices_stops_at_first_invalid_entry(recorded_h200_nvml):
    specs = _adapter(recorded_h200_nvml, visible="1,7,0").discover_devices()
    assert [s.capabilities.details["nvml_index"] for s in specs] == [1]


def test_cuda_visible_devices_empty_hides_every_gpu_and_says_so(recorded_h200_nvml):
    adapter = _adapter(recorded_h200_nvml, visible="")
    assert adapter.discover_devices() == []
    assert "CUDA_VISIBLE_DEVICES=''" in adapter.unavailable_reason


def test_cuda_visible_devices_parsing():
    assert parse_cuda_visible_devices(None) is None
    assert parse_cuda_visible_devices(" 0, GPU-ab ,MIG-cd") == ["0", "GPU-ab", "MIG-cd"]
    assert parse_cuda_visible_devices("") == []


def test_refresh_memory_rereads_nvml_by_uuid(recorded_h200_nvml):
    adapter = _adapter(recorded_h200_nvml)
    spec = adapter.discover_devices()[1]
    recorded_h200_nvml.devices[1]["memory"]["free"] = 100 * 10**9
    adapter.refresh_memory(spec)
    assert spec.capabilities.memory_free_gb == pytest.approx(100.0)


def test_nvml_is_shut_down_after_discovery(recorded_h200_nvml):
    _adapter(recorded_h200_nvml).discover_devices()
    assert recorded_h200_nvml.initialised == 0


def test_missing_nvml_library_gives_reason_and_no_devices(replay):
    # What pynvml raised on the driver-less CI machine: NVMLError_LibraryNotFound (12).
    adapter = _adapter(replay.RecordedNvml.without_driver())
    assert adapter.discover_devices() == []
    assert adapter.unavailable_reason == "pynvml: NVML Shared Library Not Found"


def test_rocm_build_of_torch_is_never_reported_as_nvidia(recorded_h200_nvml, monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "6.3.42131")  # what a ROCm wheel sets
    adapter = _adapter(recorded_h200_nvml)
    assert adapter.discover_devices() == []
    assert "ROCm build" in adapter.unavailable_reason


@pytest.mark.skipif(nvidia_gpu_present(), reason="this machine has an NVIDIA driver")
def test_without_driver_real_discovery_finds_nothing_and_explains():
    adapter = NvidiaAdapter()
    assert adapter.discover_devices() == []
    assert "NVIDIA" in adapter.unavailable_reason or "pynvml" in adapter.unavailable_reason


@pytest.mark.gpu
@pytest.mark.skipif(not nvidia_gpu_present(), reason="needs an NVIDIA GPU and driver")
def test_real_nvml_discovery_matches_torch_cuda():
    specs = NvidiaAdapter(use_torch_fallback=False).discover_devices()
    assert specs, NvidiaAdapter().unavailable_reason
    assert len(specs) == torch.cuda.device_count()
    for spec in specs:
        props = torch.cuda.get_device_properties(spec.index)
        caps = spec.capabilities
        assert caps.device_name == props.name
        assert caps.compute_units == props.multi_processor_count
        assert caps.compute_capability == f"{props.major}.{props.minor}"
        assert caps.memory_total_gb * 1e9 == pytest.approx(props.total_memory, rel=0.01)


@pytest.mark.gpu
@pytest.mark.skipif(not nvidia_gpu_present(), reason="needs an NVIDIA GPU and driver")
def test_real_nvml_discovery_creates_no_cuda_context():
    # A fresh process: other tests in this one may have initialised CUDA already.
    code = (
        "import torch\n"
        "from kernel_pytorch.hardware_abstraction.vendor_adapters import NvidiaAdapter\n"
        "specs = NvidiaAdapter(use_torch_fallback=False).discover_devices()\n"
        "print(len(specs) > 0, torch.cuda.is_initialized())\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]
