"""Host CPU adapter: cores, ISA level, clock and memory from the OS (Linux /proc and /sys).

Peak = physical cores usable by this process x datasheet (base) clock x FLOP per clock
per core for torch's ISA level (see ``peak_flops.cpu_flop_per_clock_per_core``).  SMT
siblings share a core's FMA pipes, so they are not counted twice.
"""

from __future__ import annotations

import os
import platform
import re
from typing import Dict, List, Optional, Set, Tuple

import torch

from ..hal_core import BYTES_PER_GB, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter
from ..peak_flops import cpu_flop_per_clock_per_core, peak_from_rates

__all__ = ["CpuAdapter"]

# torch computes every one of these on the CPU (fp8 only as storage, so it is absent).
_CPU_DTYPES = ["fp64", "fp32", "fp16", "bf16", "int8"]
_KIB = 1024


class CpuAdapter(VendorAdapter):
    """Discovers the host CPU as one device, ``torch.device("cpu")``.

    Args:
        proc_root: where procfs is mounted; tests pass a directory of recorded files.
        sys_root: where sysfs is mounted.
        allowed_cpus: logical CPU ids to count; default: this process's affinity mask.
    """

    vendor = HardwareVendor.CPU
    device_type, backend, process_group_backend = "cpu", "cpu", "gloo"
    priority = 0  # the last resort

    def __init__(self, proc_root: str = "/proc", sys_root: str = "/sys",
                 allowed_cpus: Optional[Set[int]] = None) -> None:
        super().__init__()
        self._proc_root = proc_root
        self._sys_root = sys_root
        self._allowed_cpus = allowed_cpus

    def discover_devices(self) -> List[DeviceSpec]:
        """The host CPU; never empty, since the process runs on it."""
        processors = _parse_cpuinfo(_read(os.path.join(self._proc_root, "cpuinfo")) or "")
        first = processors[0] if processors else {}
        allowed = self._allowed_cpus if self._allowed_cpus is not None else _allowed_cpus()
        physical_cores, logical_cpus = _count_cores(processors, allowed)
        clock_mhz, clock_source = self._datasheet_clock_mhz(first)
        total_gb, free_gb, memory_source = self._memory_gb()

        isa = torch.backends.cpu.get_cpu_capability()
        flags = (first.get("flags") or first.get("Features") or "").split()
        rates = cpu_flop_per_clock_per_core(isa, flags)
        details: Dict[str, object] = {
            "isa": isa,
            "logical_cpus": logical_cpus,
            "physical_cores": physical_cores,
            "memory_source": memory_source,
            "clock_source": clock_source,
            "flop_per_clock_per_core": rates,
        }
        if clock_mhz is None:
            peak: Dict[str, float] = {}
            details["peak_source"] = "unavailable: no clock found in sysfs or /proc/cpuinfo"
        else:
            peak = peak_from_rates(rates, physical_cores, clock_mhz)
            details["peak_source"] = (
                f"{physical_cores} cores x {clock_mhz:.0f} MHz x FLOP/clk/core for {isa}"
            )
        machine = platform.machine().replace("_", "-") or "unknown"
        caps = HardwareCapabilities(
            device_name=first.get("model name") or platform.processor() or machine,
            vendor=HardwareVendor.CPU,
            architecture=f"{machine} {isa}",
            compute_capability=None,
            memory_total_gb=total_gb,
            memory_free_gb=free_gb,
            compute_units=physical_cores,
            clock_mhz=clock_mhz,
            peak_tflops=peak,
            supported_dtypes=list(_CPU_DTYPES),
            details=details,
        )
        self._unavailable_reason = None
        return [DeviceSpec(HardwareVendor.CPU, 0, torch.device("cpu"), caps)]

    def refresh_memory(self, spec: DeviceSpec) -> None:
        """Re-read MemAvailable (and the cgroup limit) into ``memory_free_gb`` (GB)."""
        self._check_owns(spec)
        spec.capabilities.memory_free_gb = self._memory_gb()[1]

    def _datasheet_clock_mhz(self, first_cpu: Dict[str, str]) -> Tuple[Optional[float], str]:
        # Base frequency is the sustained all-core figure; "cpu MHz" is the current clock
        # (on a VM, the host's nominal one); cpuinfo_max_freq is the single-core turbo.
        cpufreq = os.path.join(self._sys_root, "devices/system/cpu/cpu0/cpufreq")
        base_khz = _read_number(os.path.join(cpufreq, "base_frequency"))
        if base_khz:
            return base_khz / 1e3, "sysfs cpufreq base_frequency"
        match = re.search(r"@\s*([\d.]+)\s*GHz", first_cpu.get("model name", ""))
        if match:
            return float(match.group(1)) * 1e3, "nominal clock in /proc/cpuinfo model name"
        current_mhz = first_cpu.get("cpu MHz")
        if current_mhz:
            return float(current_mhz), "/proc/cpuinfo 'cpu MHz' (current clock)"
        max_khz = _read_number(os.path.join(cpufreq, "cpuinfo_max_freq"))
        if max_khz:
            return max_khz / 1e3, "sysfs cpuinfo_max_freq (turbo clock; peak overstated)"
        return None, "unknown"

    def _memory_gb(self) -> Tuple[float, float, str]:
        meminfo = _parse_meminfo(_read(os.path.join(self._proc_root, "meminfo")) or "")
        if "MemTotal" in meminfo:
            total = meminfo["MemTotal"]
            free = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
            source = "/proc/meminfo MemTotal, MemAvailable"
        else:
            page = os.sysconf("SC_PAGE_SIZE")
            total = page * os.sysconf("SC_PHYS_PAGES")
            free = page * os.sysconf("SC_AVPHYS_PAGES")
            source = "os.sysconf SC_PHYS_PAGES, SC_AVPHYS_PAGES"
        # A container's cgroup v2 limit caps what this process may use.
        cgroup = os.path.join(self._sys_root, "fs/cgroup")
        limit = _read_number(os.path.join(cgroup, "memory.max"))
        if limit and limit < total:
            used = _read_number(os.path.join(cgroup, "memory.current")) or 0
            total, free = limit, min(free, max(limit - used, 0))
            source += ", capped by cgroup memory.max"
        return total / BYTES_PER_GB, free / BYTES_PER_GB, source


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _read_number(path: str) -> Optional[int]:
    text = _read(path)
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() else None  # memory.max may read "max"


def _parse_cpuinfo(text: str) -> List[Dict[str, str]]:
    """One dict per 'processor' block of /proc/cpuinfo."""
    processors: List[Dict[str, str]] = []
    for block in text.strip().split("\n\n"):
        entry: Dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if "processor" in entry:
            processors.append(entry)
    return processors


def _parse_meminfo(text: str) -> Dict[str, int]:
    """/proc/meminfo fields in bytes (the file prints kB meaning KiB)."""
    values: Dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = _KIB if len(parts) > 1 and parts[1] == "kB" else 1
            values[key.strip()] = int(parts[0]) * scale
    return values


def _allowed_cpus() -> Optional[Set[int]]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return None


def _count_cores(processors: List[Dict[str, str]], allowed: Optional[Set[int]]) -> Tuple[int, int]:
    """(physical cores, logical CPUs) among the CPUs this process may run on."""
    usable = [p for p in processors
              if allowed is None or int(p.get("processor", -1)) in allowed]
    logical = len(usable) or (len(allowed) if allowed else (os.cpu_count() or 1))
    if usable and all("core id" in p for p in usable):
        cores = {(p.get("physical id", "0"), p["core id"]) for p in usable}
        return len(cores), logical
    return logical, logical  # no topology fields (aarch64): one thread per core
