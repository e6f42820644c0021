"""Backend-level device API on top of the HAL: which torch backend to run on, with fallback.

A *backend* is one vendor adapter seen from torch, named by the adapter's ``backend``
attribute (``cuda`` for NVIDIA, ``rocm`` for AMD, which torch also addresses as
``cuda``, ``xpu``, ``mps``, ``custom`` for kernel_pytorch's ``my_asic``, ``opencl``,
``cpu``); :data:`BACKEND_PRIORITY`, the order AUTO tries them in, is the adapters'
priority order. A backend is available when the HAL found devices *and* the adapter's
torch-level check passes (an NVIDIA GPU seen through NVML under a CPU-only torch is
reported, but not offered; OpenCL devices never are). Choosing is one call of
:func:`~.selection.explain_selection` over the available backends' devices, with the
backends' vendors as the preference order. A backend whose devices are all simulated
(my_asic on its bundled simulator, which runs on the host CPU) comes after the CPU for
AUTO; asking for it by name still gets it.
"""

from __future__ import annotations

import enum
import logging
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, TextIO, Tuple, Type, Union

import torch

from .hal_core import BYTES_PER_GB, BYTES_PER_GIB, DeviceSpec, HardwareVendor, VendorAdapter
from .registry import HardwareAbstractionLayer, adapter_classes
from .selection import explain_selection

__all__ = [
    "BackendPreference", "BACKEND_PRIORITY", "BackendInfo", "BackendSelection", "InsufficientDeviceMemoryError",
    "discover_backends", "best_available_backend", "format_backend_summary", "print_backend_summary",
    "select_backend", "init_backend", "init_backend_with_memory_check",
]

logger = logging.getLogger(__name__)


class _Backend(str, enum.Enum):
    """Which backend a script asks for; AUTO takes the best available one."""

    @classmethod
    def parse(cls, value: Union[str, "_Backend"]) -> "_Backend":
        """Case-insensitive lookup by backend name, or by a vendor name or alias
        (``my_asic`` gives CUSTOM, ``nvidia`` CUDA)."""
        if isinstance(value, cls):
            return value
        key = str(value).strip().lower()
        if key in _ADAPTERS or key == "auto":
            return cls(key)
        try:
            vendor = HardwareVendor.parse(key)
        except ValueError:
            vendor = None
        member = next((m for m in BACKEND_PRIORITY if m.vendor is vendor), None)
        if member is None:
            raise ValueError(f"unknown backend {value!r}; use one of: {', '.join(['auto', *sorted(_ADAPTERS)])} "
                             f"(or a vendor name such as my_asic)")
        return member

    @property
    def adapter_class(self) -> Type[VendorAdapter]:
        """The registered adapter behind this backend (not defined for AUTO)."""
        if self.value == "auto":
            raise ValueError("BackendPreference.AUTO stands for every backend; it has no single vendor")
        return _ADAPTERS[self.value]

    @property
    def vendor(self) -> HardwareVendor:
        """The HAL vendor whose devices make up this backend (not defined for AUTO)."""
        return self.adapter_class.vendor


_ADAPTERS: Dict[str, Type[VendorAdapter]] = {cls.backend or cls.vendor.value: cls for cls in adapter_classes()}
#: AUTO plus one member per registered adapter, named by its ``backend`` (``CUDA``, ``CUSTOM``).
BackendPreference = _Backend("BackendPreference", [("AUTO", "auto")] + [(name.upper(), name) for name in _ADAPTERS],
                             module=__name__, qualname="BackendPreference")
#: Order AUTO tries backends in, and the order explicit preferences fall back in.
BACKEND_PRIORITY: Tuple[BackendPreference, ...] = tuple(BackendPreference(name) for name in _ADAPTERS)


@dataclass(frozen=True)
class BackendInfo:
    """One backend as found on this machine.

    ``available`` means torch can run on at least one of ``devices`` now; otherwise
    ``reason`` says why not. ``devices`` lists what the HAL found even when torch
    cannot use it.
    """

    name: BackendPreference
    available: bool
    reason: Optional[str]
    devices: Tuple[DeviceSpec, ...] = ()

    @property
    def simulated(self) -> bool:
        """True when every device of this backend is simulated on the host CPU."""
        return bool(self.devices) and all(spec.is_simulated for spec in self.devices)

    @property
    def best_device(self) -> Optional[DeviceSpec]:
        """The device with the most free memory (lowest index on ties); None without devices."""
        return min(self.devices, key=lambda spec: (-spec.capabilities.memory_free_gb, spec.index), default=None)

    @property
    def torch_device(self) -> Optional[torch.device]:
        """``best_device.device`` when the backend is available, else None."""
        return self.best_device.device if self.available and self.devices else None


@dataclass(frozen=True)
class BackendSelection:
    """What :func:`select_backend` chose and which backends it passed over, with why."""

    backend: BackendInfo
    device: torch.device
    requested: BackendPreference
    skipped: Tuple[Tuple[BackendPreference, str], ...] = ()

    @property
    def fell_back(self) -> bool:
        """True when an explicit preference could not be honoured."""
        return self.requested is not BackendPreference.AUTO and self.backend.name is not self.requested


class InsufficientDeviceMemoryError(RuntimeError):
    """No candidate device has the free memory a job needs; carries the shortfall in bytes."""

    def __init__(self, message: str, required_bytes: int, best_free_bytes: int) -> None:
        super().__init__(message)
        self.required_bytes = required_bytes
        self.best_free_bytes = best_free_bytes
        self.shortfall_bytes = required_bytes - best_free_bytes


_shared_hal: Optional[HardwareAbstractionLayer] = None


def _resolve_hal(hal: Optional[HardwareAbstractionLayer]) -> HardwareAbstractionLayer:
    """The caller's HAL, or one process-wide HAL so repeated calls reuse its cached discovery."""
    global _shared_hal
    if hal is None and _shared_hal is None:
        _shared_hal = HardwareAbstractionLayer()
    return hal if hal is not None else _shared_hal


def discover_backends(hal: Optional[HardwareAbstractionLayer] = None) -> List[BackendInfo]:
    """Every backend in :data:`BACKEND_PRIORITY` order, available or not, with reasons.

    Args:
        hal: the HAL to read; None uses one process-wide HAL (discovered once).
    """
    hal = _resolve_hal(hal)
    by_vendor, unavailable = hal.devices_by_vendor(), hal.unavailable_vendors()
    adapter_vendors = {adapter.vendor for adapter in hal.adapters}
    infos = []
    for backend in BACKEND_PRIORITY:
        vendor = backend.vendor
        devices = tuple(by_vendor.get(vendor, ()))
        if devices:
            missing = backend.adapter_class.torch_support_missing()
            infos.append(BackendInfo(backend, missing is None, missing, devices))
        elif vendor not in adapter_vendors:
            infos.append(BackendInfo(backend, False, f"no {vendor.value} adapter in this HardwareAbstractionLayer"))
        else:
            infos.append(BackendInfo(backend, False, unavailable.get(vendor, f"no {vendor.value} devices found")))
    return infos


def _candidate_order(preference: BackendPreference, strict: bool,
                     infos: Dict[BackendPreference, BackendInfo]) -> List[BackendPreference]:
    """Priority order with simulated backends behind the real ones (the CPU included);
    an explicit preference first (alone with ``strict``)."""
    ranked = sorted(BACKEND_PRIORITY, key=lambda backend: infos[backend].simulated)
    if preference is BackendPreference.AUTO:
        return ranked
    return [preference] + ([] if strict else [backend for backend in ranked if backend is not preference])


def _choose(preference: BackendPreference, hal: Optional[HardwareAbstractionLayer], strict: bool,
            required_bytes: int = 0) -> Tuple[Optional[BackendSelection], list, List[DeviceSpec]]:
    """(selection or None, the backends passed over with why, the available candidates' devices)."""
    infos = {info.name: info for info in discover_backends(hal)}
    order = _candidate_order(preference, strict, infos)
    usable = [spec for backend in order if infos[backend].available for spec in infos[backend].devices]
    verdicts = explain_selection(usable, required_bytes / BYTES_PER_GB, 0, dtype=None,
                                 preferred_vendors=[backend.vendor for backend in order])
    chosen = verdicts[0].device if verdicts and verdicts[0].accepted else None
    skipped: List[Tuple[BackendPreference, str]] = []
    for backend in order:
        info = infos[backend]
        if chosen is not None and chosen.vendor is backend.vendor:
            selection = BackendSelection(info, chosen.device, preference, tuple(skipped))
            if selection.fell_back:
                logger.warning("backend %s unavailable, falling back to %s", preference.value, backend.value)
            return selection, skipped, usable
        free_bytes = int(info.best_device.capabilities.memory_free_gb * BYTES_PER_GB) if info.available else 0
        reason = f"{info.best_device.device} has {free_bytes} bytes free" if info.available else info.reason
        logger.info("skipping backend %s: %s", backend.value, reason)
        skipped.append((backend, reason))
    return None, skipped, usable


def _no_backend(preference: BackendPreference, strict: bool, skipped) -> RuntimeError:
    detail = "; ".join(f"{backend.value}: {reason}" for backend, reason in skipped)
    if strict:
        return RuntimeError(f"backend {preference.value} is not available ({detail}); pass strict=False to fall back")
    return RuntimeError(f"no usable backend for {preference.value} ({detail})")


def best_available_backend(hal: Optional[HardwareAbstractionLayer] = None) -> BackendInfo:
    """The backend AUTO selects: the first available one in priority order (CPU when
    nothing else is), a simulated one only when no real one is available.

    Raises:
        RuntimeError: no backend is available at all (only possible with a HAL
            built without the CPU adapter).
    """
    selection, skipped, _ = _choose(BackendPreference.AUTO, hal, False)
    if selection is None:
        raise RuntimeError(f"no backend is available ({_no_backend(BackendPreference.AUTO, False, skipped)}); "
                           f"construct the HardwareAbstractionLayer with a CpuAdapter (the default adapters include one)")
    return selection.backend


def format_backend_summary(hal: Optional[HardwareAbstractionLayer] = None) -> str:
    """The text :func:`print_backend_summary` prints."""
    lines = ["Backends (priority order):"]
    for info in discover_backends(hal):
        suffix = f"{len(info.devices)} device(s)" if info.available else info.reason
        if info.simulated:
            suffix += ", simulated on the host CPU (not preferred; ask for it by name)"
        lines.append(f"  {chr(0x2713) if info.available else chr(0x2717)} {info.name.value:<7} {suffix}")
        lines += [f"      {spec.label:<10} {spec.name}: {spec.capabilities.memory_total_gb:.1f} GB total, "
                  f"{spec.capabilities.memory_free_gb:.1f} GB free" for spec in info.devices]
    try:
        best = best_available_backend(hal)
        lines.append(f"Recommended backend: {best.name.value} ({best.torch_device})")
    except RuntimeError:
        lines.append("Recommended backend: none available")
    return "\n".join(lines)


def print_backend_summary(hal: Optional[HardwareAbstractionLayer] = None, file: Optional[TextIO] = None) -> None:
    """Print each backend with ✓/✗ (and the reason for ✗), its devices with total/free
    memory (GB = 1e9 bytes), and the recommended backend."""
    print(format_backend_summary(hal), file=file if file is not None else sys.stdout)


def select_backend(
    preference: Union[str, BackendPreference] = BackendPreference.AUTO,
    hal: Optional[HardwareAbstractionLayer] = None,
    strict: bool = False,
) -> BackendSelection:
    """Choose a backend and device, recording why each earlier candidate was skipped.

    AUTO tries :data:`BACKEND_PRIORITY` in order, simulated backends after the CPU. An
    explicit preference is tried first, then the others in that order, unless
    ``strict``. Within the backend the device with the most free memory (GB) wins.

    Raises:
        RuntimeError: nothing usable (with ``strict``: the preferred backend is not
            usable); the message carries the reasons.
    """
    preference = BackendPreference.parse(preference)
    selection, skipped, _ = _choose(preference, hal, strict)
    if selection is None:
        raise _no_backend(preference, strict, skipped)
    return selection


def init_backend(
    preference: Union[str, BackendPreference] = BackendPreference.AUTO,
    hal: Optional[HardwareAbstractionLayer] = None,
    strict: bool = False,
) -> torch.device:
    """The torch.device :func:`select_backend` chooses; skipped backends are logged (INFO
    per skip, WARNING when an explicit preference falls back)."""
    return select_backend(preference, hal, strict).device


def init_backend_with_memory_check(
    preference: Union[str, BackendPreference],
    required_bytes: int,
    hal: Optional[HardwareAbstractionLayer] = None,
    strict: bool = False,
) -> torch.device:
    """Like :func:`init_backend`, but only accept a device with ``required_bytes`` free.

    Live free memory is re-read (``hal.refresh()``) first; candidates are tried in
    :func:`select_backend`'s order.

    Args:
        required_bytes: bytes the job needs, e.g. ``estimate_inference_memory(...).total_bytes``.

    Raises:
        InsufficientDeviceMemoryError: no candidate has enough free memory; the message
            gives the shortfall in bytes and GiB (2^30 bytes).
        RuntimeError: no candidate backend is usable at all.
    """
    if isinstance(required_bytes, bool) or not isinstance(required_bytes, int) or required_bytes < 0:
        raise ValueError(f"required_bytes must be a non-negative int number of bytes, got {required_bytes!r}")
    preference = BackendPreference.parse(preference)
    hal = _resolve_hal(hal)
    hal.refresh()
    selection, skipped, usable = _choose(preference, hal, strict, required_bytes)
    if selection is not None:
        return selection.device
    if not usable:
        raise _no_backend(preference, strict, skipped)
    spec = max(usable, key=lambda candidate: candidate.capabilities.memory_free_gb)
    free_bytes = int(spec.capabilities.memory_free_gb * BYTES_PER_GB)
    short = required_bytes - free_bytes
    raise InsufficientDeviceMemoryError(
        f"need {required_bytes} bytes ({required_bytes / BYTES_PER_GIB:.2f} GiB) free but the most free memory is "
        f"{free_bytes} bytes ({free_bytes / BYTES_PER_GIB:.2f} GiB) on {spec.device}: short by {short} bytes "
        f"({short / BYTES_PER_GIB:.2f} GiB). Tried {'; '.join(f'{b.value}: {r}' for b, r in skipped)}. Use a smaller "
        f"model, fewer bytes per parameter or a shorter max_seq_len, or free device memory",
        required_bytes, free_bytes)
