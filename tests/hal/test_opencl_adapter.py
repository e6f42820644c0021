"""OpenCLAdapter: real discovery through the ICD loader (PoCL's CPU device on CI)."""

import ctypes

import pytest
import torch

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.vendor_adapters import OpenCLAdapter


def _opencl_loader_present() -> bool:
    try:
        ctypes.CDLL("libOpenCL.so.1")
    except OSError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _opencl_loader_present(),
    reason="no OpenCL ICD loader: apt-get install ocl-icd-libopencl1 pocl-opencl-icd",
)


@pytest.fixture(scope="module")
def devices():
    adapter = OpenCLAdapter()
    found = adapter.discover_devices()
    if not found:
        pytest.skip(f"no OpenCL device: {adapter.unavailable_reason}")
    return found


def test_opencl_devices_are_listed_but_not_torch_usable(devices):
    for index, spec in enumerate(devices):
        assert spec.vendor is HardwareVendor.OPENCL and spec.index == index
        assert spec.torch_usable is False and spec.device == torch.device("cpu")


def test_opencl_device_reports_units_clock_and_memory(devices):
    caps = devices[0].capabilities
    assert caps.compute_units >= 1 and caps.clock_mhz > 0
    assert caps.memory_total_gb > 0 and caps.memory_free_gb == caps.memory_total_gb
    assert caps.details["memory_free_source"].startswith("OpenCL has no free-memory query")


def test_opencl_peak_is_a_labelled_estimate(devices):
    caps = devices[0].capabilities
    rate = caps.details["flop_per_clock_per_unit"]["fp32"]
    assert caps.peak_tflops["fp32"] == pytest.approx(caps.compute_units * caps.clock_mhz * rate / 1e6, rel=1e-3)
    assert caps.details["peak_source"].startswith("estimate:")


def test_pocl_cpu_device_is_typed_cpu(devices):
    pocl = [d for d in devices if d.capabilities.details["platform"] == "Portable Computing Language"]
    if not pocl:
        pytest.skip("PoCL is not installed (apt-get install pocl-opencl-icd)")
    assert pocl[0].capabilities.architecture == "opencl-cpu"


def test_readings_match_pyopencl(devices):
    cl = pytest.importorskip("pyopencl")
    theirs = [d for p in cl.get_platforms() for d in p.get_devices()]
    assert [d.name.strip() for d in theirs] == [s.name for s in devices]
    for ours, device in zip(devices, theirs):
        assert ours.capabilities.compute_units == device.max_compute_units
        assert ours.capabilities.clock_mhz == device.max_clock_frequency
        assert ("fp64" in ours.capabilities.supported_dtypes) == ("cl_khr_fp64" in device.extensions.split())
