"""Hardware Abstraction Layer: discover accelerators of any vendor and describe them alike.

Importing this package is cheap: it loads the core types and the adapter registry; the
adapters and peak tables load when the registry is first asked, the other helpers on
first attribute access, vendor runtimes (pynvml, amdsmi, ...) only inside discovery.

    >>> import kernel_pytorch.hardware_abstraction as hal
    >>> for spec in hal.HardwareAbstractionLayer().discover():
    ...     print(spec)
"""

from __future__ import annotations

import importlib
from typing import Any, Dict

from .hal_core import (
    BYTES_PER_GB,
    BYTES_PER_GIB,
    PRECISIONS,
    DeviceLink,
    DeviceSpec,
    HardwareCapabilities,
    HardwareVendor,
    VendorAdapter,
    precision_key,
)
from .registry import ENTRY_POINT_GROUP, HardwareAbstractionLayer, adapter_class, default_adapters

# Public name -> submodule that defines it; resolved on first access (PEP 562) so that
# `import kernel_pytorch.hardware_abstraction` does not pay for what it does not use.
_LAZY_EXPORTS: Dict[str, str] = {
    **dict.fromkeys(["auto_detect_best_adapter", "NvidiaAdapter", "AmdAdapter", "IntelAdapter", "CpuAdapter",
                     "CustomAsicAdapter", "OpenCLAdapter", "AppleMpsAdapter"], "vendor_adapters"),
    "theoretical_peak_tflops": "peak_flops",
    **dict.fromkeys(["select_device", "explain_selection"], "selection"),
    **dict.fromkeys(["init_process_group_from_mesh", "process_group_backend_string"], "process_groups"),
    **dict.fromkeys(["MemoryMonitor", "MemoryEvent", "device_memory_usage"], "memory_monitor"),
    **dict.fromkeys(["set_error_handler", "get_error_handler"], "error_handler"),
}

__all__ = [
    "BYTES_PER_GB", "BYTES_PER_GIB", "ENTRY_POINT_GROUP", "adapter_class", "default_adapters", "PRECISIONS",
    "DeviceLink", "DeviceSpec", "HardwareAbstractionLayer", "HardwareCapabilities", "HardwareVendor",
    "VendorAdapter", "precision_key", *_LAZY_EXPORTS,
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY_EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
