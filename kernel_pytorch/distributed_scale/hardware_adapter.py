"""``HardwareAdapter``: the device-selection facade of ``kernel_pytorch.distributed_scale``.

HAL mode (``HardwareAdapter(enable_hal=True)``) chooses among the devices of every vendor a
:class:`~kernel_pytorch.hardware_abstraction.HardwareAbstractionLayer` discovered once
(selection reads cached figures: microseconds; :meth:`HardwareAdapter.refresh` re-reads free
memory). Legacy mode (``HardwareAdapter()``) offers only
:meth:`HardwareAdapter.get_optimal_device_placement`, among the devices torch itself sees.
Both choose through :mod:`kernel_pytorch.hardware_abstraction.selection`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch

from ..hardware_abstraction.hal_core import BYTES_PER_GB, DeviceSpec, HardwareCapabilities, HardwareVendor
from ..hardware_abstraction.placement import (
    MeshDescription, StageAssignment, WorkerAssignment, device_mesh_description, place_model_stages, place_workload)
from ..hardware_abstraction.registry import HardwareAbstractionLayer, adapter_classes, vendor_priority
from ..hardware_abstraction.selection import SelectionVerdict, VendorLike, explain_selection, select_device
from ..hardware_abstraction.vendor_adapters.cpu import CpuAdapter

__all__ = ["HardwareAdapter"]

_HAL_DISABLED = "HAL is disabled; construct HardwareAdapter(enable_hal=True)"


def _torch_view(vendor: HardwareVendor, device: torch.device, free_bytes: int) -> DeviceSpec:
    """A device as torch alone describes it: its free memory, nothing else."""
    free_gb = free_bytes / BYTES_PER_GB
    caps = HardwareCapabilities(str(device), vendor, "", None, free_gb, free_gb, 0, None, {})
    return DeviceSpec(vendor, device.index or 0, device, caps)


def _shares_host_memory(spec: DeviceSpec) -> bool:
    """Whether the device's tensors live in host memory: the CPU, and simulated devices."""
    return (spec.vendor is HardwareVendor.CPU and spec.torch_usable) or bool(
        spec.capabilities.details.get("shares_host_memory"))


def _torch_devices() -> List[DeviceSpec]:
    """Every device torch itself can use now, with free memory from torch, in adapter
    priority order (one vendor per torch device type), the CPU last."""
    found: List[DeviceSpec] = []
    seen = {"cpu", None}
    for cls in adapter_classes():
        device_type = cls.device_type
        if device_type in seen or cls.torch_support_missing() is not None:
            continue
        seen.add(device_type)
        if device_type == "mps":
            free = torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory()
            found.append(_torch_view(cls.vendor, torch.device("mps"), int(free)))
            continue
        module = getattr(torch, device_type)
        for index in range(module.device_count()):
            if hasattr(module, "mem_get_info"):
                free, _total = module.mem_get_info(index)
            else:
                free = module.get_device_properties(index).total_memory
            found.append(_torch_view(cls.vendor, torch.device(device_type, index), int(free)))
    host_free_bytes = int(CpuAdapter()._memory_gb()[1] * BYTES_PER_GB)  # MemAvailable, capped by cgroup
    return found + [_torch_view(HardwareVendor.CPU, torch.device("cpu"), host_free_bytes)]


class HardwareAdapter:
    """Pick devices for a job, across vendors (HAL mode) or from torch alone (legacy mode).

    Args:
        enable_hal: use the Hardware Abstraction Layer. Off by default so code
            written against the legacy adapter keeps its behaviour.
        hal: the HAL to use in HAL mode; None builds one with every built-in
            vendor adapter. Passing a HAL with ``enable_hal=False`` is an error.
    """

    def __init__(self, enable_hal: bool = False, hal: Optional[HardwareAbstractionLayer] = None) -> None:
        if hal is not None and not enable_hal:
            raise ValueError("a HardwareAbstractionLayer was passed with enable_hal=False; pass enable_hal=True to use it")
        self._enable_hal = bool(enable_hal)
        self._hal: Optional[HardwareAbstractionLayer] = None
        if self._enable_hal:
            self._hal = hal if hal is not None else HardwareAbstractionLayer()

    # ------------------------------------------------------------------ HAL mode

    def is_hal_enabled(self) -> bool:
        """True in HAL mode."""
        return self._enable_hal

    @property
    def hal(self) -> HardwareAbstractionLayer:
        """The HAL behind this adapter (HAL mode only)."""
        if self._hal is None:
            raise RuntimeError(_HAL_DISABLED)
        return self._hal

    @property
    def devices(self) -> List[DeviceSpec]:
        """Every device the HAL found (HAL mode; cached after the first access)."""
        return self.hal.devices

    def refresh(self) -> List[DeviceSpec]:
        """Re-read live free memory of the known devices (HAL mode) and return them."""
        return self.hal.refresh()

    def get_optimal_device_hal(
        self,
        memory_requirement_gb: float,
        compute_requirement_tflops: float,
        preferred_vendors: Union[None, str, Iterable[VendorLike]] = None,
        dtype: Union[str, torch.dtype] = "bf16",
    ) -> Optional[DeviceSpec]:
        """Best device with ``memory_requirement_gb`` GB (1e9 bytes) free and a dense
        ``dtype`` peak of at least ``compute_requirement_tflops`` TFLOPS; None if none fits.

        ``preferred_vendors`` (names such as ``'nvidia'``, ``'amd'``, ``'cuda'``)
        restricts the search to those vendors, earlier ones winning. Rules:
        :mod:`kernel_pytorch.hardware_abstraction.selection`. Reads cached
        discovery; call :meth:`refresh` first for live free memory.
        """
        return select_device(self.devices, memory_requirement_gb, compute_requirement_tflops, dtype, preferred_vendors)

    def explain_device_selection(
        self,
        memory_requirement_gb: float,
        compute_requirement_tflops: float,
        preferred_vendors: Union[None, str, Iterable[VendorLike]] = None,
        dtype: Union[str, torch.dtype] = "bf16",
    ) -> List[SelectionVerdict]:
        """Per-device verdicts behind :meth:`get_optimal_device_hal`: ranked picks, then
        rejected devices with every reason."""
        return explain_selection(self.devices, memory_requirement_gb, compute_requirement_tflops, dtype, preferred_vendors)

    def get_cross_vendor_capabilities(self) -> Dict[str, Any]:
        """What the machine offers, across vendors.

        Returns a dict with:

        * ``cross_vendor_devices``: one dict per device (vendor, index, device,
          name, architecture, memory in GB, peak TFLOPS per precision, ...).
          ``device`` is the torch device string (``"cuda:0"``); for a device torch
          cannot address it is ``"<vendor>:<index>"`` (``"opencl:0"``), as the CLI
          tables print it. ``simulated`` marks devices simulated on the host CPU;
          ``unreadable`` lists figures the vendor API could not give.
        * ``vendor_distribution``: vendor value -> number of devices.
        * ``available_memory_gb`` / ``total_memory_gb``: sums over the memory of
          the devices torch can use, GB (1e9 bytes), each memory counted once:
          the CPU and simulated devices (``shares_host_memory``) all hold their
          tensors in host memory, so together they count as the largest of their
          figures (the host's, as the CPU reports it), never as a sum that
          exceeds the host. OpenCL devices are left out because they usually
          describe memory already counted (the host's, or a GPU's also seen
          through its vendor adapter).
        * ``total_peak_tflops``: precision -> summed dense peak of those
          devices, TFLOPS (TOPS for int8).
        * ``unavailable_vendors``: vendor value -> why its adapter found nothing.
        """
        devices = self.devices
        distribution: Dict[str, int] = {}
        total_peak: Dict[str, float] = {}
        available_gb = 0.0
        total_gb = 0.0
        host_free_gb = host_total_gb = 0.0  # the host's memory: the CPU's and the simulated devices'
        rows = []
        for spec in devices:
            caps = spec.capabilities
            distribution[spec.vendor.value] = distribution.get(spec.vendor.value, 0) + 1
            rows.append(
                {
                    "vendor": spec.vendor.value,
                    "index": spec.index,
                    "device": spec.label,
                    "name": spec.name,
                    "architecture": caps.architecture,
                    "compute_capability": caps.compute_capability,
                    "memory_total_gb": caps.memory_total_gb,
                    "memory_free_gb": caps.memory_free_gb,
                    "compute_units": caps.compute_units,
                    "clock_mhz": caps.clock_mhz,
                    "peak_tflops": dict(caps.peak_tflops),
                    "supported_dtypes": list(caps.supported_dtypes),
                    "torch_usable": spec.torch_usable,
                    "simulated": spec.is_simulated,
                    "shares_host_memory": _shares_host_memory(spec),
                    "overcommitted": caps.details.get("overcommitted"),
                    "unreadable": dict(caps.details.get("unreadable", {})),
                }
            )
            if not spec.torch_usable:
                continue
            if _shares_host_memory(spec):
                # An overcommitted simulator's capacity is more than the host holds: count the host.
                host_limit = caps.details.get("host_memory_total_gb", float("inf"))
                host_free_gb = max(host_free_gb, caps.memory_free_gb)
                host_total_gb = max(host_total_gb, min(caps.memory_total_gb, host_limit))
            else:
                available_gb += caps.memory_free_gb
                total_gb += caps.memory_total_gb
            for key, tflops in caps.peak_tflops.items():
                total_peak[key] = total_peak.get(key, 0.0) + tflops
        return {
            "cross_vendor_devices": rows,
            "vendor_distribution": distribution,
            "available_memory_gb": available_gb + host_free_gb,
            "total_memory_gb": total_gb + host_total_gb,
            "total_peak_tflops": total_peak,
            "unavailable_vendors": {vendor.value: reason for vendor, reason in self.hal.unavailable_vendors().items()},
        }

    def place_workload(
        self, num_workers: int, dtype: Union[str, torch.dtype] = "bf16", memory_per_worker_gb: Optional[float] = None
    ) -> List[WorkerAssignment]:
        """:func:`~kernel_pytorch.hardware_abstraction.placement.place_workload` over this adapter's devices."""
        return place_workload(self.devices, num_workers, dtype, memory_per_worker_gb)

    def place_model_stages(
        self, stage_memory_gb: Sequence[float], dtype: Union[str, torch.dtype] = "bf16"
    ) -> List[StageAssignment]:
        """:func:`~kernel_pytorch.hardware_abstraction.placement.place_model_stages` over this adapter's devices."""
        return place_model_stages(self.devices, stage_memory_gb, dtype)

    def device_mesh_description(self, mesh_dim_names: Tuple[str, ...] = ("data_parallel",)) -> List[MeshDescription]:
        """:func:`~kernel_pytorch.hardware_abstraction.placement.device_mesh_description` over this adapter's devices."""
        return device_mesh_description(self.devices, mesh_dim_names)

    def init_process_group(self, device_types: Optional[Sequence[str]] = None, **kwargs):
        """Joins a process group over this adapter's devices of ``device_types`` (default: all).

        :func:`~kernel_pytorch.hardware_abstraction.process_groups.init_process_group_from_mesh`
        over :meth:`device_mesh_description`, keeping the meshes of the given
        torch device types; keyword arguments go to it (rank, world_size,
        init_method, timeout). Returns its ``MeshProcessGroup``.
        """
        from kernel_pytorch.hardware_abstraction.process_groups import init_process_group_from_mesh

        meshes = self.device_mesh_description()
        if device_types is not None:
            missing = set(device_types) - {m.device_type for m in meshes}
            if missing:
                raise ValueError(
                    f"no {sorted(missing)} devices here; this adapter has {[m.device_type for m in meshes]}")
            meshes = [m for m in meshes if m.device_type in device_types]
        return init_process_group_from_mesh(meshes, **kwargs)

    # ------------------------------------------------------------------ legacy mode

    def get_optimal_device_placement(self, memory_gb: float, compute_tflops: float = 0.0) -> List[torch.device]:
        """Legacy contract: the torch devices with ``memory_gb`` GB (1e9 bytes) free, best first.

        Works in both modes and never runs HAL discovery or a vendor library: free
        memory comes from torch (``torch.<type>.mem_get_info``; total memory
        where a backend lacks it; ``torch.mps.recommended_max_memory`` minus
        what the MPS driver holds) and, for the CPU, from the OS
        (``MemAvailable``).

        Order: accelerator types in the HAL adapters' priority order (cuda,
        xpu, mps, my_asic), within a type most free memory first, then
        ``torch.device("cpu")`` last; the ranking is
        :func:`~kernel_pytorch.hardware_abstraction.selection.explain_selection`'s
        with every vendor preferred in that order. An empty list means nothing
        has enough free memory.

        ``compute_tflops`` must be >= 0 but is not checked: torch reports no
        peak throughput. Use :meth:`get_optimal_device_hal` (HAL mode) for
        compute- and dtype-aware selection.

        Note that querying free memory initialises the accelerator runtimes
        torch sees (e.g. creates a CUDA context), as ``torch.cuda.mem_get_info``
        does.
        """
        for name, value in (("memory_gb", memory_gb), ("compute_tflops", compute_tflops)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        verdicts = explain_selection(_torch_devices(), memory_gb, 0, dtype=None, preferred_vendors=vendor_priority())
        return [verdict.device.device for verdict in verdicts if verdict.accepted]

    def __repr__(self) -> str:
        return f"HardwareAdapter(enable_hal={self._enable_hal})"
