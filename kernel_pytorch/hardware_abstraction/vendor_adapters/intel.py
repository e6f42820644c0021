"""Intel GPU adapter: ``torch.xpu`` (upstream since torch 2.4).

Intel Extension for PyTorch (IPEX) is end-of-life: its last release (2.8) pins torch 2.8,
and importing it under a newer torch prints an error and raises.  It is therefore never
imported by default; ``IntelAdapter(use_ipex=True)`` tries it for old stacks where only
IPEX registers ``torch.xpu``, and any exception it raises is recorded, never propagated.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import torch

from ..hal_core import BYTES_PER_GB, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter
from ..peak_flops import architecture_throughput, datasheet_clock_mhz, theoretical_peak_tflops

__all__ = ["IntelAdapter", "intel_architecture"]

# Product-name families -> peak_flops architecture keys.  torch.xpu reports no core clock
# and no stable architecture id across versions, so the name decides.
_ARCHITECTURE_BY_NAME = (
    (r"Data Center GPU Max", "xe-hpc"),
    (r"Arc\(TM\) A\d|Arc A\d|Data Center GPU Flex", "xe-hpg"),
)


def intel_architecture(device_name: str) -> Optional[str]:
    """peak_flops architecture key for an Intel GPU name, or None if unknown."""
    for pattern, architecture in _ARCHITECTURE_BY_NAME:
        if re.search(pattern, device_name):
            return architecture
    return None


class IntelAdapter(VendorAdapter):
    """Discovers Intel GPUs through ``torch.xpu``.

    Args:
        xpu_runtime: a ``torch.xpu``-like object (``is_available``, ``device_count``,
            ``get_device_properties``, optionally ``mem_get_info``); default ``torch.xpu``.
            Tests pass a fake that replays recorded ``torch.xpu`` output.
        use_ipex: opt in to importing ``intel_extension_for_pytorch`` first.
    """

    vendor = HardwareVendor.INTEL
    device_type, backend, process_group_backend = "xpu", "xpu", "xccl"
    aliases = ("xpu",)
    priority = 50

    def __init__(self, xpu_runtime: Any = None, use_ipex: bool = False) -> None:
        super().__init__()
        self._xpu_runtime = xpu_runtime
        self._use_ipex = use_ipex
        self._ipex_status: Optional[str] = None

    def discover_devices(self) -> List[DeviceSpec]:
        """``xpu:N`` devices; [] with a reason if torch has no usable XPU."""
        if self._use_ipex and self._ipex_status is None:
            self._ipex_status = _try_import_ipex()
        runtime = self._xpu_runtime if self._xpu_runtime is not None else getattr(torch, "xpu", None)
        if runtime is None or not runtime.is_available():
            reason = "torch.xpu is not available (this torch build has no XPU support or no Intel GPU driver/device)"
            if self._ipex_status:
                reason += f"; IPEX: {self._ipex_status}"
            self._unavailable_reason = reason
            return []
        specs = [self._spec(runtime, index) for index in range(runtime.device_count())]
        self._unavailable_reason = None if specs else "torch.xpu reports 0 devices"
        return specs

    def refresh_memory(self, spec: DeviceSpec) -> None:
        """Re-read free memory (GB) with ``torch.xpu.mem_get_info`` where torch has it."""
        self._check_owns(spec)
        runtime = self._xpu_runtime if self._xpu_runtime is not None else torch.xpu
        free = _free_bytes(runtime, spec.index)
        if free is not None:
            spec.capabilities.memory_free_gb = free / BYTES_PER_GB

    def _spec(self, runtime: Any, index: int) -> DeviceSpec:
        props = runtime.get_device_properties(index)
        name = props.name
        architecture = intel_architecture(name)
        # gpu_eu_count is the vector-engine count; max_compute_units equals it on Xe GPUs.
        eu_count = int(getattr(props, "gpu_eu_count", 0) or props.max_compute_units)
        details: Dict[str, Any] = {
            "driver_version": getattr(props, "driver_version", None),
            "platform_name": getattr(props, "platform_name", None),
            "uuid": str(getattr(props, "uuid", "")) or None,
            "has_fp64": bool(getattr(props, "has_fp64", False)),
            "has_fp16": bool(getattr(props, "has_fp16", False)),
        }
        if self._ipex_status:
            details["ipex"] = self._ipex_status
        total = int(props.total_memory)
        free = _free_bytes(runtime, index)
        if free is None:
            free = total
            details["memory_free_source"] = "unknown (torch.xpu.mem_get_info missing): reporting total"
        else:
            details["memory_free_source"] = "torch.xpu.mem_get_info"
        clock_mhz = datasheet_clock_mhz(HardwareVendor.INTEL, name)
        details["clock_source"] = (
            "datasheet clock table (peak_flops.PRODUCT_CLOCKS)" if clock_mhz is not None
            else "unknown: torch.xpu reports no core clock and the product is not in the table"
        )
        table = architecture_throughput(HardwareVendor.INTEL, architecture) if architecture else None
        if table is None:
            peak: Dict[str, float] = {}
            details["peak_source"] = f"unavailable: no peak table for {name!r}"
            supported = ["fp32"] + [k for k, flag in (("fp16", "has_fp16"), ("fp64", "has_fp64"))
                                    if details[flag]]
        elif clock_mhz is None:
            peak = {}
            details["peak_source"] = "unavailable: clock unknown"
            supported = list(table.flop_per_clock_per_unit)
        else:
            peak = theoretical_peak_tflops(HardwareVendor.INTEL, architecture, eu_count, clock_mhz)
            details["peak_source"] = f"{eu_count} EU x {clock_mhz:.0f} MHz x {architecture} FLOP/clk/EU"
            supported = list(table.flop_per_clock_per_unit)
        if not details["has_fp64"]:
            supported = [k for k in supported if k != "fp64"]
            peak.pop("fp64", None)
        caps = HardwareCapabilities(
            device_name=name,
            vendor=HardwareVendor.INTEL,
            architecture=architecture or "unknown-intel-gpu",
            compute_capability=None,
            memory_total_gb=total / BYTES_PER_GB,
            memory_free_gb=free / BYTES_PER_GB,
            compute_units=eu_count,
            clock_mhz=clock_mhz,
            peak_tflops=peak,
            supported_dtypes=supported,
            details=details,
        )
        return DeviceSpec(HardwareVendor.INTEL, index, torch.device("xpu", index), caps)


def _free_bytes(runtime: Any, index: int) -> Optional[int]:
    mem_get_info = getattr(runtime, "mem_get_info", None)
    if mem_get_info is None:
        return None
    try:
        return int(mem_get_info(index)[0])
    except RuntimeError:  # older drivers lack the free-memory query (ZES sysman)
        return None


def _try_import_ipex() -> str:
    """Import IPEX; return what happened.  Never raises."""
    try:
        import intel_extension_for_pytorch as ipex
    except BaseException as error:  # noqa: B036 - IPEX under a newer torch raises anything, even SystemExit
        if isinstance(error, KeyboardInterrupt):
            raise
        return f"import failed: {error!r}"
    return f"imported {getattr(ipex, '__version__', 'unknown version')}"
