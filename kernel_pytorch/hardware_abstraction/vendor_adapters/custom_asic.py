"""Custom ASIC adapter: the device registered on torch's PrivateUse1 key (``my_asic``).

kernel_pytorch registers its device module as ``torch.my_asic`` with torch.cuda-like
calls (``is_available``, ``device_count``, ``get_device_properties``, ``mem_get_info``).
The adapter looks up whatever name PrivateUse1 was renamed to, so another out-of-tree
backend built the same way is discovered too.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from ..hal_core import BYTES_PER_GB, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter

__all__ = ["CustomAsicAdapter"]


def _host_memory_gb() -> tuple:
    """(total, available, source) of the host's memory, GB, as the CPU adapter reads it."""
    from .cpu import CpuAdapter

    return CpuAdapter()._memory_gb()

_NOT_REGISTERED = "kernel_pytorch my_asic extension not built/registered"
# The device computes what torch's CPU kernels compute (see CpuAdapter), fp8 as storage only.
_ASIC_DTYPES = ["fp64", "fp32", "fp16", "bf16", "int8"]


class CustomAsicAdapter(VendorAdapter):
    """Discovers devices of the PrivateUse1 backend.

    Args:
        backend_name: the torch device-type name; default: what PrivateUse1 is renamed to
            (``torch._C._get_privateuse1_backend_name()``).
    """

    vendor = HardwareVendor.CUSTOM_ASIC
    device_type, backend, process_group_backend = "my_asic", "custom", "myccl"
    aliases = ("my_asic", "asic", "custom", "privateuseone")
    priority = 30

    def __init__(self, backend_name: Optional[str] = None) -> None:
        super().__init__()
        self._backend_name = backend_name

    def _device_module(self) -> tuple:
        name = self._backend_name or torch._C._get_privateuse1_backend_name()
        if name == "privateuseone":  # never renamed: no backend registered
            return name, None
        return name, getattr(torch, name, None)

    def discover_devices(self) -> List[DeviceSpec]:
        """``<backend>:N`` devices; [] with a reason when no backend is registered."""
        name, module = self._device_module()
        if module is None:
            import kernel_pytorch

            problem = getattr(kernel_pytorch, "_EXTENSION_PROBLEM", None)
            self._unavailable_reason = problem or f"{_NOT_REGISTERED} (torch.{name} does not exist)"
            return []
        if not module.is_available():
            self._unavailable_reason = f"torch.{name}.is_available() is False"
            return []
        count = module.device_count()
        specs = [self._spec(name, module, index, count) for index in range(count)]
        self._unavailable_reason = None if specs else f"torch.{name}.device_count() is 0"
        return specs

    def refresh_memory(self, spec: DeviceSpec) -> None:
        """Re-read free memory (GB) with ``torch.<backend>.mem_get_info`` (for a simulated
        device: capped by the host's available memory, which backs it)."""
        self._check_owns(spec)
        _, module = self._device_module()
        if module is None:
            raise ValueError(f"{spec.name}: {_NOT_REGISTERED}; it cannot be refreshed")
        free = module.mem_get_info(spec.index)[0] / BYTES_PER_GB
        if spec.capabilities.details.get("shares_host_memory"):
            free = min(free, _host_memory_gb()[1])
        spec.capabilities.memory_free_gb = free

    def _spec(self, backend: str, module: Any, index: int, count: int) -> DeviceSpec:
        props = module.get_device_properties(index)
        free, total = module.mem_get_info(index)
        host_addressable = bool(getattr(props, "host_addressable", False))
        simulated_check = getattr(module, "is_simulated", None)
        simulated = bool(simulated_check()) if simulated_check is not None else False
        details: Dict[str, Any] = {"backend": backend, "host_addressable": host_addressable,
                                   "simulated": simulated,
                                   "memory_source": f"torch.{backend}.mem_get_info"}
        free_gb = free / BYTES_PER_GB
        if simulated:
            details["simulated_note"] = (
                "kernel_pytorch's reference runtime: device memory is host RAM and kernels run on "
                "the host CPU; selected only when asked for (preferred_vendors=['my_asic'])")
            # Its memory is the host's: no more of it is free than the host has available,
            # and the CPU and every simulated device draw on that same memory.
            host_total_gb, host_free_gb, host_source = _host_memory_gb()
            details["shares_host_memory"] = True
            details["host_memory_total_gb"] = host_total_gb
            details["memory_source"] = (f"torch.{backend}.mem_get_info, capped by the host's available memory "
                                        f"({host_source}), which the CPU and every simulated device share")
            free_gb = min(free_gb, host_free_gb)
            simulated_gb = count * total / BYTES_PER_GB
            if simulated_gb > host_total_gb:
                details["overcommitted"] = (
                    f"{count} simulated device(s) of {total / BYTES_PER_GB:.1f} GB hold {simulated_gb:.1f} GB, "
                    f"more than the host's {host_total_gb:.1f} GB (the runtime's overcommit=1)")
        if host_addressable:
            # Host-addressable device memory means kernel_pytorch runs torch's CPU kernels
            # in place on the host: the host CPU's peak is the device's peak.
            from .cpu import CpuAdapter

            host = CpuAdapter().discover_devices()[0].capabilities
            peak = dict(host.peak_tflops)
            clock_mhz = host.clock_mhz
            details["peak_source"] = f"host CPU ({host.device_name}) runs the kernels in place"
        else:
            peak, clock_mhz = {}, None
            details["peak_source"] = "unavailable: the runtime reports no clock or throughput"
        caps = HardwareCapabilities(
            device_name=f"{props.name} (simulated)" if simulated else props.name,
            vendor=HardwareVendor.CUSTOM_ASIC,
            # The kpdr ABI reports no architecture; the reference runtime is a simulator.
            architecture=getattr(props, "architecture", None) or f"{backend.replace('_', '')}-sim",
            compute_capability=None,
            memory_total_gb=total / BYTES_PER_GB,
            memory_free_gb=free_gb,
            compute_units=int(props.multi_processor_count),
            clock_mhz=clock_mhz,
            peak_tflops=peak,
            supported_dtypes=list(_ASIC_DTYPES),
            details=details,
        )
        return DeviceSpec(HardwareVendor.CUSTOM_ASIC, index, torch.device(backend, index), caps)
