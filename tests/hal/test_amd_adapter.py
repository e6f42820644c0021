"""AmdAdapter from a transcribed ROCm MI300X machine (tests/hal/recorded/rocm_mi300x_x2.json:
figures from public rocminfo output and AMD's datasheet, not captured by us; see the
file's "transcribed" note).  torch.cuda of a ROCm build and amdsmi are replayed fakes."""

import pytest
import torch

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.vendor_adapters import AmdAdapter


@pytest.fixture
def mi300x(replay):
    return replay.load("rocm_mi300x_x2.json")


def _adapter(replay, recording, with_amdsmi=True):
    return AmdAdapter(
        hip_runtime=replay.RecordedTorchDeviceModule(recording["torch_cuda"]),
        hip_version=recording["hip_version"],
        amdsmi=replay.RecordedAmdSmi(recording["amdsmi"]) if with_amdsmi else None,
        use_amdsmi=with_amdsmi,
    )


def test_mi300x_is_amd_keyed_on_gcn_arch_not_major_minor(replay, mi300x):
    spec = _adapter(replay, mi300x).discover_devices()[0]
    caps = spec.capabilities
    assert spec.vendor is HardwareVendor.AMD and spec.device == torch.device("cuda", 0)
    assert caps.architecture == "gfx942"
    assert caps.compute_capability is None  # "9.4" would read as an NVIDIA capability
    assert caps.details["gcn_arch_name"] == "gfx942:sramecc+:xnack-"
    assert caps.compute_units == 304


def test_mi300x_peak_matches_datasheet(replay, mi300x):
    caps = _adapter(replay, mi300x).discover_devices()[0].capabilities
    assert caps.clock_mhz == 2100
    assert caps.peak_tflops_for(torch.bfloat16) == pytest.approx(1307.4, rel=0.01)
    assert caps.peak_tflops_for(torch.float8_e4m3fn) == pytest.approx(2614.9, rel=0.01)


def test_amdsmi_processors_are_matched_by_hip_id_not_enumeration_order(replay, mi300x):
    # The recording lists amdsmi processors in reverse HIP order with different usage.
    hip0, hip1 = _adapter(replay, mi300x).discover_devices()
    assert hip0.capabilities.memory_free_gb == pytest.approx((196592 - 283) * 2**20 / 1e9)
    assert hip1.capabilities.memory_free_gb == pytest.approx((196592 - 1008) * 2**20 / 1e9)
    assert hip0.capabilities.details["memory_source"] == "amdsmi_get_gpu_vram_usage"


def test_xgmi_links_with_amdsmi_bandwidth(replay, mi300x):
    hip0, _ = _adapter(replay, mi300x).discover_devices()
    (link,) = hip0.capabilities.links
    assert (link.peer_index, link.kind, link.bandwidth_gbps) == (1, "xgmi", 64.0)


def test_without_amdsmi_memory_comes_from_hip_and_peak_from_datasheet(replay, mi300x):
    caps = _adapter(replay, mi300x, with_amdsmi=False).discover_devices()[0].capabilities
    assert caps.details["memory_source"] == "torch.cuda.mem_get_info (HIP)"
    assert caps.memory_free_gb == pytest.approx(205.08, abs=0.01)
    assert caps.peak_tflops_for("bf16") == pytest.approx(1307.4, rel=0.01)
    assert caps.links == []


def test_unlisted_product_takes_amdsmi_max_clock_labelled(replay, mi300x):
    for device in mi300x["torch_cuda"]:
        device["name"] = "AMD Instinct MI308X"
    for processor in mi300x["amdsmi"]["processors"]:
        processor["market_name"] = "AMD Instinct MI308X"
        processor["clock_gfx"]["max_clk"] = 2000
    caps = _adapter(replay, mi300x).discover_devices()[0].capabilities
    assert caps.clock_mhz == 2000.0
    assert "amdsmi max GFX clock" in caps.details["clock_source"]


def test_mi250x_gcd_gets_cdna2_rates(replay, mi300x):
    # An MI250X module shows up as two GCDs of 110 CUs each.
    gcd = dict(mi300x["torch_cuda"][0], name="AMD Instinct MI250X/MI250",
               gcnArchName="gfx90a:sramecc+:xnack-", multi_processor_count=110)
    adapter = AmdAdapter(hip_runtime=replay.RecordedTorchDeviceModule([gcd]),
                         hip_version="6.3.42131", use_amdsmi=False)
    caps = adapter.discover_devices()[0].capabilities
    assert caps.architecture == "gfx90a"
    assert caps.peak_tflops_for("bf16") == pytest.approx(383.0 / 2, rel=0.01)
    assert caps.peak_tflops_for("fp8") is None


def test_refresh_memory_rereads_amdsmi(replay, mi300x):
    amdsmi = replay.RecordedAmdSmi(mi300x["amdsmi"])
    adapter = AmdAdapter(hip_runtime=replay.RecordedTorchDeviceModule(mi300x["torch_cuda"]),
                         hip_version=mi300x["hip_version"], amdsmi=amdsmi)
    spec = adapter.discover_devices()[0]
    amdsmi.processors[1]["vram_usage"]["vram_used"] = 100000
    adapter.refresh_memory(spec)
    assert spec.capabilities.memory_free_gb == pytest.approx((196592 - 100000) * 2**20 / 1e9)


def test_cuda_build_of_torch_is_not_claimed_as_amd(replay, mi300x):
    adapter = AmdAdapter(hip_runtime=replay.RecordedTorchDeviceModule(mi300x["torch_cuda"]),
                         hip_version=None, use_amdsmi=False)
    assert adapter.discover_devices() == []
    assert "not a ROCm build" in adapter.unavailable_reason


def test_this_machine_has_no_rocm_and_says_so():
    adapter = AmdAdapter()
    if torch.version.hip:
        pytest.skip("this torch is a ROCm build")
    assert adapter.discover_devices() == []
    assert "torch.version.hip is None" in adapter.unavailable_reason
