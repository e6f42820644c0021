"""CpuAdapter: real discovery on this machine, and parsing of /proc and /sys recorded
from the CI machine (tests/hal/recorded/proc_epyc_kvm)."""

import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.peak_flops import cpu_flop_per_clock_per_core
from kernel_pytorch.hardware_abstraction.vendor_adapters import CpuAdapter

RECORDED_PROC = Path(__file__).resolve().parent / "recorded" / "proc_epyc_kvm"


@pytest.fixture
def proc_root(tmp_path):
    """A writable copy of the recorded /proc files."""
    root = tmp_path / "proc"
    shutil.copytree(RECORDED_PROC, root)
    return root


@pytest.fixture
def empty_sys(tmp_path):
    root = tmp_path / "sys"
    root.mkdir()
    return root


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_real_cpu_is_discovered_as_torch_cpu_device():
    (spec,) = CpuAdapter().discover_devices()
    caps = spec.capabilities
    assert spec.vendor is HardwareVendor.CPU and spec.device == torch.device("cpu")
    assert 1 <= caps.compute_units <= os.cpu_count()
    assert caps.details["isa"] == torch.backends.cpu.get_cpu_capability()
    assert caps.architecture.endswith(caps.details["isa"])


def test_real_cpu_memory_matches_the_os():
    caps = CpuAdapter().discover_devices()[0].capabilities
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    assert caps.memory_total_gb <= physical * 1.001
    assert 0 < caps.memory_free_gb <= caps.memory_total_gb


def test_real_cpu_peak_is_cores_times_clock_times_isa_rate():
    caps = CpuAdapter().discover_devices()[0].capabilities
    if caps.clock_mhz is None:
        pytest.skip(f"no clock on this machine: {caps.details['clock_source']}")
    rate = caps.details["flop_per_clock_per_core"]["fp32"]
    expected = caps.compute_units * caps.clock_mhz * rate / 1e6
    assert caps.peak_tflops_for(torch.float32) == pytest.approx(expected, rel=1e-3)


def test_recorded_epyc_vm_reads_cores_clock_and_memory(proc_root, empty_sys):
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1}).discover_devices()[0].capabilities
    assert caps.device_name == "AMD EPYC"
    assert caps.compute_units == 2
    assert caps.clock_mhz == pytest.approx(2445.404)
    assert caps.details["clock_source"] == "/proc/cpuinfo 'cpu MHz' (current clock)"
    assert caps.memory_total_gb == pytest.approx(24683656 * 1024 / 1e9)
    assert caps.memory_free_gb == pytest.approx(22702996 * 1024 / 1e9)  # MemAvailable


def test_sysfs_base_frequency_wins_over_current_clock(proc_root, empty_sys):
    _write(empty_sys / "devices/system/cpu/cpu0/cpufreq/base_frequency", "2100000\n")
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1}).discover_devices()[0].capabilities
    assert caps.clock_mhz == 2100.0
    assert caps.details["clock_source"] == "sysfs cpufreq base_frequency"


def test_smt_siblings_share_one_core(proc_root, empty_sys):
    text = (proc_root / "cpuinfo").read_text().strip()
    first = text.split("\n\n")[0]
    sibling = first.replace("processor\t: 0", "processor\t: 2", 1)  # same core id 0
    (proc_root / "cpuinfo").write_text(text + "\n\n" + sibling + "\n")
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1, 2}).discover_devices()[0].capabilities
    assert caps.compute_units == 2
    assert caps.details["logical_cpus"] == 3


def test_affinity_mask_limits_counted_cores(proc_root, empty_sys):
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={1}).discover_devices()[0].capabilities
    assert caps.compute_units == 1


def test_cgroup_memory_limit_caps_total_and_free(proc_root, empty_sys):
    _write(empty_sys / "fs/cgroup/memory.max", str(8 * 10**9))
    _write(empty_sys / "fs/cgroup/memory.current", str(3 * 10**9))
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1}).discover_devices()[0].capabilities
    assert caps.memory_total_gb == pytest.approx(8.0)
    assert caps.memory_free_gb == pytest.approx(5.0)
    assert "cgroup" in caps.details["memory_source"]


def test_unlimited_cgroup_leaves_os_memory(proc_root, empty_sys):
    _write(empty_sys / "fs/cgroup/memory.max", "max\n")
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1}).discover_devices()[0].capabilities
    assert caps.memory_total_gb == pytest.approx(24683656 * 1024 / 1e9)


def test_refresh_memory_rereads_mem_available(proc_root, empty_sys):
    adapter = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1})
    spec = adapter.discover_devices()[0]
    meminfo = re.sub(r"MemAvailable:\s+\d+ kB", "MemAvailable: 1000000 kB",
                     (proc_root / "meminfo").read_text())
    (proc_root / "meminfo").write_text(meminfo)
    adapter.refresh_memory(spec)
    assert spec.capabilities.memory_free_gb == pytest.approx(1.024)


def test_recorded_flags_feed_the_isa_rates(proc_root, empty_sys):
    caps = CpuAdapter(str(proc_root), str(empty_sys), allowed_cpus={0, 1}).discover_devices()[0].capabilities
    flags = (proc_root / "cpuinfo").read_text().split("flags\t\t: ")[1].split("\n")[0].split()
    assert caps.details["flop_per_clock_per_core"] == cpu_flop_per_clock_per_core(caps.details["isa"], flags)
