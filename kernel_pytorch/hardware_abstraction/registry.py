"""The adapter registry: which vendor adapters exist, and the layer that runs them.

Built-in adapters are the modules of ``vendor_adapters/``, loaded by name (the module name
is the vendor's value); out-of-tree ones come from installed distributions through the
entry-point group :data:`ENTRY_POINT_GROUP` and replace the built-in adapter of their
vendor (docs/vendor_adapters.md). Every vendor table of the HAL (aliases, discovery,
backend and selection order, process-group backends) is derived here from the adapters'
class attributes.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import pkgutil
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Type

from . import hal_core
from .hal_core import DeviceSpec, HardwareVendor, VendorAdapter

__all__ = [
    "ENTRY_POINT_GROUP", "HardwareAbstractionLayer", "accelerator_device_types", "adapter_class", "adapter_classes",
    "default_adapters", "process_group_backends", "vendor_aliases", "vendor_priority",
]

#: Entry-point group an installed distribution lists its adapter class in.
ENTRY_POINT_GROUP = "kernel_pytorch.hal_adapters"

_BUILTIN_PACKAGE = f"{__package__}.vendor_adapters"
_BUILTIN_DIR = os.path.join(os.path.dirname(__file__), "vendor_adapters")


def _is_adapter(obj: object) -> bool:
    return isinstance(obj, type) and issubclass(obj, VendorAdapter) and not getattr(obj, "__abstractmethods__", None)


@functools.lru_cache(maxsize=None)
def _registered() -> Dict[str, Type[VendorAdapter]]:
    """name -> adapter class, highest priority first (computed once per process)."""
    by_vendor: Dict[HardwareVendor, Tuple[str, Type[VendorAdapter]]] = {}
    for module_info in pkgutil.iter_modules([_BUILTIN_DIR]):
        module = importlib.import_module(f"{_BUILTIN_PACKAGE}.{module_info.name}")
        for cls in filter(_is_adapter, (getattr(module, name) for name in getattr(module, "__all__", ()))):
            by_vendor[cls.vendor] = (module_info.name, cls)
    builtin = {vendor: name for vendor, (name, _) in by_vendor.items()}
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            cls = entry.load()
            if not _is_adapter(cls) or not isinstance(getattr(cls, "vendor", None), HardwareVendor):
                raise TypeError("not a concrete VendorAdapter subclass with a HardwareVendor `vendor`")
        except Exception as error:  # a broken plug-in must not take the HAL down with it
            warnings.warn(f"HAL adapter entry point {entry.name!r} ({entry.value}) failed to load: {error!r}; "
                          f"skipping it", RuntimeWarning, stacklevel=2)
            continue
        taken = by_vendor.get(cls.vendor)
        if taken is not None and taken[0] != builtin.get(cls.vendor):
            warnings.warn(f"HAL adapter entry points {taken[0]!r} and {entry.name!r} both adapt "
                          f"{cls.vendor.value}; keeping {taken[0]!r} (uninstall one of them)",
                          RuntimeWarning, stacklevel=2)
            continue
        by_vendor[cls.vendor] = (entry.name, cls)
    ordered = sorted(by_vendor.values(), key=lambda item: (-item[1].priority, item[0]))
    return dict(ordered)


def adapter_classes() -> Tuple[Type[VendorAdapter], ...]:
    """Every registered adapter class (built-in or entry point), highest priority first."""
    return tuple(_registered().values())


def adapter_class(name: str) -> Type[VendorAdapter]:
    """The adapter registered under ``name``: its registry name, vendor value or an alias.

    Raises:
        ValueError: no adapter answers to ``name``; the message lists the names.
    """
    registered = _registered()
    key = str(name).strip().lower()
    if key in registered:
        return registered[key]
    try:
        vendor = HardwareVendor.parse(key)
    except ValueError:
        raise ValueError(f"no HAL adapter named {name!r}; registered: {', '.join(registered)}") from None
    return next(cls for cls in registered.values() if cls.vendor is vendor)


def default_adapters() -> List[VendorAdapter]:
    """A fresh instance of every registered adapter, highest priority first (the CPU last)."""
    return [cls() for cls in adapter_classes()]


@functools.lru_cache(maxsize=None)
def vendor_aliases() -> Dict[str, HardwareVendor]:
    """alias -> vendor, from each adapter's ``aliases`` (what HardwareVendor.parse accepts)."""
    return {alias: cls.vendor for cls in adapter_classes() for alias in cls.aliases}


@functools.lru_cache(maxsize=None)
def vendor_priority() -> Tuple[HardwareVendor, ...]:
    """Vendors in the order selection prefers them when the caller names none."""
    return tuple(cls.vendor for cls in adapter_classes())


def process_group_backends() -> Dict[str, str]:
    """torch device type -> ``torch.distributed`` backend, from the adapters."""
    return {cls.device_type: cls.process_group_backend for cls in reversed(adapter_classes())
            if cls.device_type and cls.process_group_backend}


def accelerator_device_types() -> Tuple[str, ...]:
    """torch device types of the accelerators, best first (the CPU is not one)."""
    return tuple(dict.fromkeys(cls.device_type for cls in adapter_classes()
                               if cls.device_type not in (None, "cpu")))


hal_core.install_vendor_aliases(vendor_aliases)


class HardwareAbstractionLayer:
    """Runs every vendor adapter and keeps the devices they found.

    Discovery is lazy (first :meth:`discover` or :attr:`devices`) and cached; call
    :meth:`refresh` for live free-memory figures or ``discover(refresh=True)`` to
    re-enumerate hardware. ``adapters``: the adapters to run, in discovery order;
    None runs :func:`default_adapters`.
    """

    def __init__(self, adapters: Optional[Sequence[VendorAdapter]] = None) -> None:
        adapters = default_adapters() if adapters is None else list(adapters)
        for adapter in adapters:
            if not isinstance(adapter, VendorAdapter):
                raise TypeError(f"HardwareAbstractionLayer adapters must be VendorAdapter instances, got "
                                f"{type(adapter).__name__}; subclass kernel_pytorch.hardware_abstraction.VendorAdapter")
        self._adapters: List[VendorAdapter] = adapters
        # Which adapter found each device, so refresh() can ask the right one.
        self._found: Optional[List[Tuple[VendorAdapter, DeviceSpec]]] = None

    @property
    def adapters(self) -> List[VendorAdapter]:
        """The adapters in discovery order (a copy)."""
        return list(self._adapters)

    def discover(self, refresh: bool = False) -> List[DeviceSpec]:
        """All devices of all adapters, in adapter order; cached unless ``refresh``."""
        if self._found is None or refresh:
            self._found = [(adapter, spec) for adapter in self._adapters for spec in adapter.discover_devices()]
        return [spec for _, spec in self._found]

    def refresh(self) -> List[DeviceSpec]:
        """Re-read live free memory (GB) of the known devices and return them.

        Uses each adapter's per-device :meth:`VendorAdapter.refresh_memory`; if a device
        has disappeared (driver reset, hot unplug) it falls back to full re-discovery.
        """
        if self._found is None:
            return self.discover()
        try:
            for adapter, spec in self._found:
                adapter.refresh_memory(spec)
        except ValueError:
            return self.discover(refresh=True)
        return [spec for _, spec in self._found]

    @property
    def devices(self) -> List[DeviceSpec]:
        """Same as :meth:`discover` (cached)."""
        return self.discover()

    def devices_by_vendor(self) -> Dict[HardwareVendor, List[DeviceSpec]]:
        """Discovered devices grouped by vendor; vendors with no device are absent."""
        grouped: Dict[HardwareVendor, List[DeviceSpec]] = {}
        for spec in self.discover():
            grouped.setdefault(spec.vendor, []).append(spec)
        return grouped

    def unavailable_vendors(self) -> Dict[HardwareVendor, str]:
        """``vendor -> reason`` for every adapter whose discovery found nothing."""
        self.discover()
        return {adapter.vendor: adapter.unavailable_reason for adapter in self._adapters
                if adapter.unavailable_reason is not None}
