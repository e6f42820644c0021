"""IntelAdapter from recorded torch.xpu output of a Data Center GPU Max 1550 (two stacks,
FLAT mode), copied from intel/torch-xpu-ops CI logs; see
tests/hal/recorded/xpu_max1550_flat.json."""

import sys

import pytest
import torch

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.vendor_adapters import IntelAdapter
from kernel_pytorch.hardware_abstraction.vendor_adapters.intel import intel_architecture


@pytest.fixture
def max1550(replay):
    return replay.load("xpu_max1550_flat.json")["devices"]


def test_each_max_1550_stack_is_an_xpu_device(replay, max1550):
    specs = IntelAdapter(xpu_runtime=replay.RecordedTorchDeviceModule(max1550)).discover_devices()
    assert [s.device for s in specs] == [torch.device("xpu", 0), torch.device("xpu", 1)]
    caps = specs[0].capabilities
    assert caps.vendor is HardwareVendor.INTEL
    assert caps.architecture == "xe-hpc" and caps.compute_units == 512
    assert caps.memory_total_gb == pytest.approx(68.70, abs=0.01)  # 65520 MiB


def test_max_1550_stack_peak_is_half_the_card_datasheet(replay, max1550):
    caps = IntelAdapter(xpu_runtime=replay.RecordedTorchDeviceModule(max1550)).discover_devices()[0].capabilities
    assert caps.clock_mhz == 1600
    assert caps.peak_tflops_for(torch.bfloat16) == pytest.approx(839.0 / 2, rel=0.01)
    assert caps.peak_tflops_for(torch.float64) == pytest.approx(52.4 / 2, rel=0.01)


def test_device_without_fp64_drops_fp64(replay, max1550):
    no_fp64 = [dict(max1550[0], has_fp64=0)]
    caps = IntelAdapter(xpu_runtime=replay.RecordedTorchDeviceModule(no_fp64)).discover_devices()[0].capabilities
    assert "fp64" not in caps.supported_dtypes
    assert caps.peak_tflops_for(torch.float64) is None


def test_unlisted_intel_gpu_reports_no_peak_and_says_why(replay, max1550):
    unknown = [dict(max1550[0], name="Intel(R) Graphics [0xe20b]")]
    caps = IntelAdapter(xpu_runtime=replay.RecordedTorchDeviceModule(unknown)).discover_devices()[0].capabilities
    assert caps.peak_tflops == {}
    assert "no peak table" in caps.details["peak_source"]


@pytest.mark.parametrize("name, arch", [
    ("Intel(R) Data Center GPU Max 1100", "xe-hpc"),
    ("Intel(R) Arc(TM) A770 Graphics", "xe-hpg"),
    ("Intel(R) Arc(TM) B580 Graphics", None),
])
def test_intel_architecture_from_product_name(name, arch):
    assert intel_architecture(name) == arch


def test_no_xpu_gives_reason(replay):
    adapter = IntelAdapter(xpu_runtime=replay.RecordedTorchDeviceModule([]))
    assert adapter.discover_devices() == []
    assert "torch.xpu is not available" in adapter.unavailable_reason


def test_ipex_is_not_imported_by_default():
    IntelAdapter().discover_devices()
    assert "intel_extension_for_pytorch" not in sys.modules


def test_broken_ipex_opt_in_never_breaks_discovery(replay, max1550, tmp_path, monkeypatch):
    # A stand-in for IPEX 2.8 under a newer torch: importing it raises AttributeError.
    (tmp_path / "intel_extension_for_pytorch.py").write_text(
        "raise AttributeError(\"module 'torch' has no attribute 'xpu_ext' (IPEX 2.8 needs torch 2.8)\")\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    adapter = IntelAdapter(xpu_runtime=replay.RecordedTorchDeviceModule(max1550), use_ipex=True)
    specs = adapter.discover_devices()
    assert len(specs) == 2
    assert specs[0].capabilities.details["ipex"].startswith("import failed: AttributeError")
