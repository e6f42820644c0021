"""Backend-level device API on top of the HAL: which torch backend to run on, with fallback.

A *backend* is one vendor adapter seen from torch, named by the adapter's ``backend``
attribute (``cuda`` for NVIDIA, ``rocm`` for AMD, which torch also addresses as
``cuda``, ``xpu``, ``mps``, ``custom`` for kernel_pytorch's ``my_asic``, ``opencl``,
``cpu``); :data:`BACKEND_PRIORITY`, the order AUTO tries them in, is the adapters'
priority order. Everything here reads the devices a :class:`HardwareAbstractionLayer`
discovered plus each adapter's torch-level check (is this torch build able to use the
devices the vendor library found?), so e.g. an NVIDIA GPU seen through NVML under a
CPU-only torch build is reported, but not offered. The choice itself is
:func:`~.selection.explain_selection` over the usable backends' devices, with the
backends' vendors as the preference order.

OpenCL devices are listed for information but torch cannot hold tensors on them, so
:func:`init_backend` always skips them. A backend whose devices are all simulated
(my_asic on its bundled simulator, which runs on the host CPU) comes after the CPU for
AUTO; asking for it by name still gets it.
"""

from __future__ import annotations

import enum
import logging
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, TextIO, Tuple, Type, Union

import torch

from .hal_core import BYTES_PER_GB, BYTES_PER_GIB, DeviceSpec, HardwareVendor, VendorAdapter
from .registry import HardwareAbstractionLayer, adapter_classes
from .selection import explain_selection

__all__ = [
    "BackendPreference",
    "BACKEND_PRIORITY",
    "BackendInfo",
    "BackendSelection",
    "InsufficientDeviceMemoryError",
    "discover_backends",
    "best_available_backend",
    "format_backend_summary",
    "print_backend_summary",
    "select_backend",
    "init_backend",
    "init_backend_with_memory_check",
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
        for member in cls:
            if key == member.value:
                return member
        try:
            vendor = HardwareVendor.parse(key)
        except ValueError:
            vendor = None
        for member in BACKEND_PRIORITY:
            if member.vendor is vendor:
                return member
        raise ValueError(
            f"unknown backend {value!r}; use one of: "
            f"{', '.join(['auto'] + sorted(m.value for m in BACKEND_PRIORITY))} (or a vendor name such as my_asic)"
        )

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


_ADAPTERS: Dict[str, Type[VendorAdapter]] = {cls.backend: cls for cls in adapter_classes()}
#: AUTO plus one member per registered adapter, named by its ``backend`` (``CUDA``, ``CUSTOM``).
BackendPreference = _Backend("BackendPreference", [("AUTO", "auto")] + [(name.upper(), name) for name in _ADAPTERS],
                             module=__name__, qualname="BackendPreference")

#: Order AUTO tries backends in, and the order explicit preferences fall back in.
BACKEND_PRIORITY: Tuple[BackendPreference, ...] = tuple(BackendPreference(name) for name in _ADAPTERS)


@dataclass(frozen=True)
class BackendInfo:
    """One backend as found on this machine.

    ``available`` means torch can run on at least one of ``devices`` now;
    otherwise ``reason`` says why not (library missing, no device, torch build
    without that backend, ...). ``devices`` lists what the HAL found even when
    torch cannot use it.
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
        if not self.devices:
            return None
        return min(self.devices, key=lambda spec: (-spec.capabilities.memory_free_gb, spec.index))

    @property
    def torch_device(self) -> Optional[torch.device]:
        """``best_device.device`` when the backend is available, else None."""
        best = self.best_device
        return best.device if self.available and best is not None else None


@dataclass(frozen=True)
class BackendSelection:
    """What :func:`select_backend` chose and which backends it passed over, with why."""

    backend: BackendInfo
    device: torch.device
    requested: BackendPreference
    skipped: Tuple[Tuple[BackendPreference, str], ...] = field(default_factory=tuple)

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
    if hal is not None:
        return hal
    if _shared_hal is None:
        _shared_hal = HardwareAbstractionLayer()
    return _shared_hal


def discover_backends(hal: Optional[HardwareAbstractionLayer] = None) -> List[BackendInfo]:
    """Every backend in :data:`BACKEND_PRIORITY` order, available or not, with reasons.

    Args:
        hal: the HAL to read; None uses one process-wide HAL (discovered once).
    """
    hal = _resolve_hal(hal)
    by_vendor = hal.devices_by_vendor()
    unavailable = hal.unavailable_vendors()
    adapter_vendors = {adapter.vendor for adapter in hal.adapters}
    infos = []
    for backend in BACKEND_PRIORITY:
        vendor = backend.vendor
        devices = tuple(by_vendor.get(vendor, ()))
        if not devices:
            if vendor in unavailable:
                reason = unavailable[vendor]
            elif vendor not in adapter_vendors:
                reason = f"no {vendor.value} adapter in this HardwareAbstractionLayer"
            else:
                reason = f"no {vendor.value} devices found"
            infos.append(BackendInfo(backend, False, reason, ()))
            continue
        missing = backend.adapter_class.torch_support_missing()
        infos.append(BackendInfo(backend, missing is None, missing, devices))
    return infos


def _auto_order(infos: List[BackendInfo]) -> List[BackendInfo]:
    """Priority order with simulated backends moved behind the real ones (the CPU included)."""
    return [info for info in infos if not info.simulated] + [info for info in infos if info.simulated]


def best_available_backend(hal: Optional[HardwareAbstractionLayer] = None) -> BackendInfo:
    """The first available backend in priority order (CPU when nothing else is); a
    simulated backend only when no real one is available.

    Raises:
        RuntimeError: no backend is available at all (only possible with a HAL
            built without the CPU adapter).
    """
    for info in _auto_order(discover_backends(hal)):
        if info.available:
            return info
    raise RuntimeError(
        "no backend is available; construct the HardwareAbstractionLayer with a CpuAdapter "
        "(the default adapters include one)"
    )


def format_backend_summary(hal: Optional[HardwareAbstractionLayer] = None) -> str:
    """The text :func:`print_backend_summary` prints."""
    infos = discover_backends(hal)
    lines = ["Backends (priority order):"]
    for info in infos:
        mark = "\u2713" if info.available else "\u2717"
        suffix = f"{len(info.devices)} device(s)" if info.available else info.reason
        if info.simulated:
            suffix += ", simulated on the host CPU (not preferred; ask for it by name)"
        lines.append(f"  {mark} {info.name.value:<7} {suffix}")
        for spec in info.devices:
            caps = spec.capabilities
            where = spec.label
            lines.append(
                f"      {where:<10} {spec.name}: {caps.memory_total_gb:.1f} GB total, "
                f"{caps.memory_free_gb:.1f} GB free"
            )
    recommended = next((info for info in _auto_order(infos) if info.available), None)
    if recommended is None:
        lines.append("Recommended backend: none available")
    else:
        lines.append(f"Recommended backend: {recommended.name.value} ({recommended.torch_device})")
    return "\n".join(lines)


def print_backend_summary(hal: Optional[HardwareAbstractionLayer] = None, file: Optional[TextIO] = None) -> None:
    """Print each backend with ✓/✗ (and the reason for ✗), its devices with total/free
    memory (GB = 1e9 bytes), and the recommended backend."""
    print(format_backend_summary(hal), file=file if file is not None else sys.stdout)


def _candidate_order(preference: BackendPreference, strict: bool,
                     infos: Dict[BackendPreference, BackendInfo]) -> List[BackendPreference]:
    auto = [info.name for info in _auto_order([infos[backend] for backend in BACKEND_PRIORITY])]
    if preference is BackendPreference.AUTO:
        return auto
    if strict:
        return [preference]
    return [preference] + [backend for backend in auto if backend is not preference]


def _choose(preference: BackendPreference, hal: Optional[HardwareAbstractionLayer], strict: bool,
            required_bytes: int = 0) -> Tuple[Optional[BackendSelection], list, List[DeviceSpec]]:
    """The selection (None if nothing fits), the backends passed over with why, and the
    devices of the usable candidate backends.

    One call of :func:`~.selection.explain_selection` over the devices of the usable
    candidate backends, with their vendors as the preference order and the memory
    requirement; no compute rule.
    """
    infos = {info.name: info for info in discover_backends(hal)}
    order = _candidate_order(preference, strict, infos)
    usable = [spec for backend in order if infos[backend].available for spec in infos[backend].devices]
    verdicts = explain_selection(usable, required_bytes / BYTES_PER_GB, 0, dtype=None,
                                 preferred_vendors=[backend.vendor for backend in order]) if usable else []
    chosen = verdicts[0].device if verdicts and verdicts[0].accepted else None
    skipped: List[Tuple[BackendPreference, str]] = []
    for backend in order:
        info = infos[backend]
        if chosen is not None and chosen.vendor is backend.vendor:
            selection = BackendSelection(info, chosen.device, preference, tuple(skipped))
            if selection.fell_back:
                logger.warning("backend %s unavailable, falling back to %s", preference.value, backend.value)
            return selection, skipped, usable
        reason = info.reason if not info.available else (
            f"{info.best_device.device} has {int(info.best_device.capabilities.memory_free_gb * BYTES_PER_GB)} bytes free")
        logger.info("skipping backend %s: %s", backend.value, reason)
        skipped.append((backend, reason))
    return None, skipped, usable


def _no_backend(preference: BackendPreference, strict: bool, skipped) -> RuntimeError:
    detail = "; ".join(f"{backend.value}: {reason}" for backend, reason in skipped)
    if strict:
        return RuntimeError(f"backend {preference.value} is not available ({detail}); pass strict=False to fall back")
    return RuntimeError(f"no usable backend for {preference.value} ({detail})")


def select_backend(
    preference: Union[str, BackendPreference] = BackendPreference.AUTO,
    hal: Optional[HardwareAbstractionLayer] = None,
    strict: bool = False,
) -> BackendSelection:
    """Choose a backend and device, recording why each earlier candidate was skipped.

    AUTO tries :data:`BACKEND_PRIORITY` in order, simulated backends after the
    CPU. An explicit preference is tried first, then the others in that order,
    unless ``strict``. Within the backend the device with the most free memory
    (GB) wins.

    Raises:
        RuntimeError: nothing usable (with ``strict``: the preferred backend is
            not usable); the message carries the reasons.
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
    """The torch.device to run on for ``preference``, with fallback (see :func:`select_backend`).

    Skipped backends are logged (INFO per skip, WARNING when an explicit
    preference falls back).
    """
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
        required_bytes: bytes the job needs, e.g.
            ``estimate_inference_memory(...).total_bytes``.

    Raises:
        InsufficientDeviceMemoryError: no candidate has enough free memory; the
            message gives the shortfall in bytes and GiB (2^30 bytes).
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
    shortfall = required_bytes - free_bytes
    tried = "; ".join(f"{backend.value}: {reason}" for backend, reason in skipped)
    raise InsufficientDeviceMemoryError(
        f"need {required_bytes} bytes ({required_bytes / BYTES_PER_GIB:.2f} GiB) free but the most free memory is "
        f"{free_bytes} bytes ({free_bytes / BYTES_PER_GIB:.2f} GiB) on {spec.device}: short by {shortfall} bytes "
        f"({shortfall / BYTES_PER_GIB:.2f} GiB). Tried {tried}. Use a smaller model, fewer bytes per "
        f"parameter or a shorter max_seq_len, or free device memory",
        required_bytes,
        free_bytes,
    )
