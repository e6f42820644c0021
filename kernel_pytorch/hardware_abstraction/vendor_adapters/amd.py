"""AMD adapter: GPUs of a ROCm build of torch, enriched by ``amdsmi`` when it is installed.

A ROCm build of torch answers ``torch.cuda.is_available()`` and names its devices
``cuda:N``: the only reliable tell is ``torch.version.hip``.  This adapter claims those
devices (the NVIDIA adapter refuses them), keys the architecture on ``gcnArchName``
(``gfx942``) rather than ``major.minor`` (an MI300X reads "9.4", which looks like an
NVIDIA compute capability), and maps HIP device ids to amdsmi processors through
``amdsmi_get_gpu_enumeration_info()["hip_id"]``, so ``HIP_VISIBLE_DEVICES`` is respected.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import torch

from ..hal_core import (
    BYTES_PER_GB, DeviceLink, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter,
)
from ..peak_flops import architecture_throughput, datasheet_clock_mhz, theoretical_peak_tflops

__all__ = ["AmdAdapter"]

_BYTES_PER_MB = 1024 * 1024  # amdsmi_get_gpu_vram_usage reports MiB, despite the "MB" name
_FALLBACK_DTYPES = ["fp64", "fp32", "fp16"]


class AmdAdapter(VendorAdapter):
    """Discovers AMD GPUs that torch can use (ROCm builds).

    Args:
        hip_runtime: a ``torch.cuda``-like object (``device_count``,
            ``get_device_properties``, ``mem_get_info``); default ``torch.cuda``.
        hip_version: the HIP version torch was built with; default ``torch.version.hip``.
        amdsmi: an ``amdsmi``-compatible module; None imports ``amdsmi`` when present.
        use_amdsmi: False skips amdsmi entirely.
    Tests pass fakes of all three built from a recording of an MI300X system.
    """

    vendor = HardwareVendor.AMD
    # ROCm torch addresses AMD GPUs as cuda and runs RCCL under the nccl name.
    device_type, backend, process_group_backend, torch_build = "cuda", "rocm", "nccl", "hip"
    aliases = ("rocm", "hip")
    priority = 60

    _FROM_TORCH: Any = object()

    def __init__(self, hip_runtime: Any = None, hip_version: Any = _FROM_TORCH,
                 amdsmi: Any = None, use_amdsmi: bool = True) -> None:
        super().__init__()
        self._hip_runtime = hip_runtime
        self._hip_version = hip_version
        self._amdsmi = amdsmi
        self._use_amdsmi = use_amdsmi

    def discover_devices(self) -> List[DeviceSpec]:
        """HIP-visible AMD GPUs as ``cuda:N`` devices; [] with a reason if none."""
        hip_version = (getattr(torch.version, "hip", None)
                       if self._hip_version is AmdAdapter._FROM_TORCH else self._hip_version)
        if not hip_version:
            self._unavailable_reason = (
                "torch is not a ROCm build (torch.version.hip is None); AMD GPUs need the "
                "ROCm wheel of torch"
            )
            return []
        runtime = self._hip_runtime if self._hip_runtime is not None else torch.cuda
        count = runtime.device_count()
        if count == 0:
            self._unavailable_reason = (
                f"ROCm torch (HIP {hip_version}) sees no GPU; check HIP_VISIBLE_DEVICES and "
                f"that the user may open /dev/kfd"
            )
            return []
        smi = _AmdSmiView.open(self._amdsmi, self._use_amdsmi)
        try:
            specs = [self._spec(runtime, index, hip_version, smi) for index in range(count)]
            if smi.available:
                _add_links(smi, specs)
        finally:
            smi.close()
        self._unavailable_reason = None
        return specs

    def refresh_memory(self, spec: DeviceSpec) -> None:
        """Re-read free memory (GB): amdsmi VRAM usage if available, else HIP's
        ``mem_get_info``."""
        self._check_owns(spec)
        smi = _AmdSmiView.open(self._amdsmi, self._use_amdsmi)
        try:
            usage = smi.vram_usage(spec.index) if smi.available else None
        finally:
            smi.close()
        if usage is not None:
            spec.capabilities.memory_free_gb = (usage[1] - usage[0]) / BYTES_PER_GB
        else:
            runtime = self._hip_runtime if self._hip_runtime is not None else torch.cuda
            spec.capabilities.memory_free_gb = runtime.mem_get_info(spec.index)[0] / BYTES_PER_GB

    def _spec(self, runtime: Any, index: int, hip_version: str, smi: "_AmdSmiView") -> DeviceSpec:
        props = runtime.get_device_properties(index)
        gcn_arch = getattr(props, "gcnArchName", "") or ""
        arch = gcn_arch.split(":", 1)[0] or "unknown-amd"
        details: Dict[str, Any] = {
            "hip_version": hip_version,
            "gcn_arch_name": gcn_arch,
            "amdsmi": "used" if smi.available else smi.reason,
        }
        usage = smi.vram_usage(index) if smi.available else None
        if usage is not None:
            used, total = usage
            free = total - used
            details["memory_source"] = "amdsmi_get_gpu_vram_usage"
        else:
            free, total = runtime.mem_get_info(index)
            details["memory_source"] = "torch.cuda.mem_get_info (HIP)"
        name = smi.market_name(index) or props.name
        clock_mhz = datasheet_clock_mhz(HardwareVendor.AMD, name)
        if clock_mhz is not None:
            details["clock_source"] = "datasheet clock table (peak_flops.PRODUCT_CLOCKS)"
        else:
            clock_mhz = smi.max_gfx_clock_mhz(index)
            details["clock_source"] = (
                "amdsmi max GFX clock (product not in the datasheet table)" if clock_mhz
                else "unknown: product not in the datasheet table and amdsmi unavailable"
            )
        table = architecture_throughput(HardwareVendor.AMD, arch)
        compute_units = int(props.multi_processor_count)
        if table is None:
            peak: Dict[str, float] = {}
            details["peak_source"] = f"unavailable: {arch} not in peak_flops tables"
        elif not clock_mhz:
            peak = {}
            details["peak_source"] = "unavailable: clock unknown"
        else:
            peak = theoretical_peak_tflops(HardwareVendor.AMD, arch, compute_units, clock_mhz)
            details["peak_source"] = f"{compute_units} CU x {clock_mhz:.0f} MHz x {arch} FLOP/clk/CU"
        caps = HardwareCapabilities(
            device_name=name,
            vendor=HardwareVendor.AMD,
            architecture=arch,
            compute_capability=None,
            memory_total_gb=total / BYTES_PER_GB,
            memory_free_gb=free / BYTES_PER_GB,
            compute_units=compute_units,
            clock_mhz=clock_mhz,
            peak_tflops=peak,
            supported_dtypes=list(table.flop_per_clock_per_unit) if table else list(_FALLBACK_DTYPES),
            details=details,
        )
        return DeviceSpec(HardwareVendor.AMD, index, torch.device("cuda", index), caps)


class _AmdSmiView:
    """amdsmi processors keyed by HIP device id; every query degrades to None."""

    def __init__(self, module: Any, reason: Optional[str]) -> None:
        self.module = module
        self.reason = reason
        self.by_hip_id: Dict[int, Any] = {}

    @property
    def available(self) -> bool:
        return self.module is not None

    @classmethod
    def open(cls, module: Any, wanted: bool) -> "_AmdSmiView":
        if not wanted:
            return cls(None, "not used (use_amdsmi=False)")
        if module is None:
            # The amdgpu kernel driver exposes /dev/kfd; without it amdsmi has nothing to
            # report, so do not import it (it dlopens libamd_smi).
            if not os.path.exists("/dev/kfd"):
                return cls(None, "no /dev/kfd (amdgpu driver not loaded)")
            try:
                import amdsmi as module
            except Exception as error:  # a broken ROCm install raises more than ImportError
                return cls(None, f"amdsmi unavailable: {error!r}")
        view = cls(module, None)
        try:
            module.amdsmi_init()
            for handle in module.amdsmi_get_processor_handles():
                hip_id = module.amdsmi_get_gpu_enumeration_info(handle)["hip_id"]
                view.by_hip_id[int(hip_id)] = handle
        except Exception as error:  # amdsmi raises AmdSmiException subclasses and KeyError
            view.close()
            return cls(None, f"amdsmi failed: {error!r}")
        return view

    def close(self) -> None:
        if self.module is not None:
            try:
                self.module.amdsmi_shut_down()
            except Exception:  # shutting down a half-initialised library may fail too
                pass

    def _query(self, hip_id: int, function: str, *args: Any) -> Any:
        handle = self.by_hip_id.get(hip_id)
        if handle is None:
            return None
        try:
            return getattr(self.module, function)(handle, *args)
        except Exception:  # not supported on this ASIC / driver
            return None

    def vram_usage(self, hip_id: int) -> Optional[tuple]:
        """(used, total) bytes."""
        usage = self._query(hip_id, "amdsmi_get_gpu_vram_usage")
        if not usage:
            return None
        return usage["vram_used"] * _BYTES_PER_MB, usage["vram_total"] * _BYTES_PER_MB

    def market_name(self, hip_id: int) -> Optional[str]:
        info = self._query(hip_id, "amdsmi_get_gpu_asic_info")
        return (info or {}).get("market_name") or None

    def max_gfx_clock_mhz(self, hip_id: int) -> Optional[float]:
        info = self._query(hip_id, "amdsmi_get_clock_info", self.module.AmdSmiClkType.GFX)
        return float(info["max_clk"]) if info and info.get("max_clk") else None

    def link(self, first: int, second: int) -> Optional[DeviceLink]:
        source, target = self.by_hip_id.get(first), self.by_hip_id.get(second)
        if source is None or target is None:
            return None
        try:
            link_type = self.module.amdsmi_topo_get_link_type(source, target)["type"]
        except Exception:
            return None
        if link_type == self.module.AmdSmiIoLinkType.XGMI:
            kind = "xgmi"
        elif link_type == self.module.AmdSmiIoLinkType.PCIEXPRESS:
            kind = "pcie-p2p"
        else:
            return None
        try:
            bandwidth = self.module.amdsmi_get_minmax_bandwidth_between_processors(source, target)
            gbps = bandwidth["max_bandwidth"] / 1e3  # MB/s -> GB/s
        except Exception:  # only defined for XGMI links
            gbps = None
        return DeviceLink(second, kind, gbps or None)


def _add_links(smi: _AmdSmiView, specs: List[DeviceSpec]) -> None:
    for spec in specs:
        for peer in specs:
            if peer.index != spec.index:
                link = smi.link(spec.index, peer.index)
                if link is not None:
                    spec.capabilities.links.append(link)
