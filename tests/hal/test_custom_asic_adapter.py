"""CustomAsicAdapter against the real my_asic device that `import kernel_pytorch`
registers on PrivateUse1 (a simulator: kernels run in place on the host CPU)."""

import pytest
import torch

import kernel_pytorch  # noqa: F401  (registers torch.my_asic once the extension is built)
from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.vendor_adapters import CpuAdapter, CustomAsicAdapter

MY_ASIC = getattr(torch, "my_asic", None)
needs_my_asic = pytest.mark.skipif(
    MY_ASIC is None, reason="kernel_pytorch my_asic extension not built/registered"
)


def test_unregistered_backend_reports_why():
    adapter = CustomAsicAdapter(backend_name="no_such_backend")
    assert adapter.discover_devices() == []
    assert adapter.unavailable_reason.startswith("kernel_pytorch my_asic extension not built/registered")


@pytest.mark.skipif(MY_ASIC is not None, reason="my_asic is registered here")
def test_default_adapter_without_extension_reports_why():
    adapter = CustomAsicAdapter()
    assert adapter.discover_devices() == []
    assert "kernel_pytorch my_asic extension not built/registered" in adapter.unavailable_reason


@needs_my_asic
def test_every_my_asic_device_is_discovered_with_its_torch_device():
    specs = CustomAsicAdapter().discover_devices()
    assert len(specs) == MY_ASIC.device_count()
    for index, spec in enumerate(specs):
        assert spec.vendor is HardwareVendor.CUSTOM_ASIC and spec.torch_usable
        assert spec.device == torch.device("my_asic", index)


@needs_my_asic
def test_my_asic_properties_come_from_the_device_module():
    for spec in CustomAsicAdapter().discover_devices():
        props = MY_ASIC.get_device_properties(spec.index)
        caps = spec.capabilities
        assert caps.device_name == f"{props.name} (simulated)"
        assert caps.memory_total_gb == pytest.approx(props.total_memory / 1e9)
        assert caps.compute_units == props.multi_processor_count
        assert caps.details["host_addressable"] == bool(props.host_addressable)


@needs_my_asic
def test_the_bundled_simulator_is_labelled_simulated():
    assert MY_ASIC.is_simulated()
    for spec in CustomAsicAdapter().discover_devices():
        assert spec.is_simulated and spec.capabilities.details["simulated"] is True
        assert "host CPU" in spec.capabilities.details["simulated_note"]


@needs_my_asic
def test_refresh_memory_sees_an_allocation():
    adapter = CustomAsicAdapter()
    spec = adapter.discover_devices()[0]
    before = spec.capabilities.memory_free_gb
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device=spec.device)
    adapter.refresh_memory(spec)
    assert before - spec.capabilities.memory_free_gb >= 0.9 * block.numel() / 1e9
    del block


@needs_my_asic
def test_host_addressable_device_peak_is_the_host_cpu_peak():
    spec = CustomAsicAdapter().discover_devices()[0]
    if not spec.capabilities.details["host_addressable"]:
        pytest.skip("this runtime's memory is not host addressable")
    host = CpuAdapter().discover_devices()[0].capabilities
    assert spec.capabilities.peak_tflops == host.peak_tflops
    assert "host CPU" in spec.capabilities.details["peak_source"]


@needs_my_asic
def test_an_overcommitted_simulator_is_said_so_and_counts_no_more_than_the_host():
    import json
    import os
    import subprocess
    import sys

    host_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    env = dict(os.environ, MY_ASIC_DEVICE_COUNT="2", MY_ASIC_MEMORY_MB=str(host_mb), MY_ASIC_OVERCOMMIT="1",
               MY_ASIC_ENABLE="1")
    code = """
import json, torch, kernel_pytorch
from kernel_pytorch.distributed_scale import HardwareAdapter
caps = HardwareAdapter(enable_hal=True).get_cross_vendor_capabilities()
cpu = next(d for d in caps["cross_vendor_devices"] if d["vendor"] == "cpu")
asic = [d for d in caps["cross_vendor_devices"] if d["vendor"] == "custom_asic"]
# Real accelerators (a GPU beside the simulator) have memory of their own.
others = sum(d["memory_total_gb"] for d in caps["cross_vendor_devices"] if d["vendor"] not in ("cpu", "custom_asic"))
print(json.dumps({"overcommitted": [d["overcommitted"] for d in asic], "total": caps["total_memory_gb"] - others,
                  "cpu_total": cpu["memory_total_gb"], "free": [d["memory_free_gb"] for d in asic],
                  "cpu_free": cpu["memory_free_gb"]}))
"""
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                            cwd=os.path.dirname(os.path.abspath(__file__)))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(note and "more than the host's" in note for note in report["overcommitted"])
    # Simulated devices add nothing to the host's memory. (Other devices are taken out above;
    # the OpenCL adapter may list a GPU or the CPU a second time, so at most, not equal.)
    assert report["total"] <= report["cpu_total"] * (1 + 1e-6)
    assert all(free <= report["cpu_free"] * 1.05 for free in report["free"])
    assert "libmyasic: overcommit=1" in result.stderr
