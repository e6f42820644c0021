"""Hardware Abstraction Layer: discover accelerators of any vendor and describe them alike.

Importing this package is cheap: it loads only the core types.  Vendor adapters, the
peak-throughput tables and the selection helpers load on first attribute access, and
vendor runtimes (pynvml, amdsmi, pyopencl, ...) only inside an adapter's discovery.

    >>> import kernel_pytorch.hardware_abstraction as hal
    >>> for spec in hal.HardwareAbstractionLayer().discover():
    ...     print(spec)
"""

from __future__ import annotations

import importlib
from typing import Any, Dict

from .hal_core import (
    BYTES_PER_GB,
    PRECISIONS,
    DeviceLink,
    DeviceSpec,
    HardwareAbstractionLayer,
    HardwareCapabilities,
    HardwareVendor,
    VendorAdapter,
    precision_key,
)

# Public name -> submodule that defines it; resolved on first access (PEP 562) so that
# `import kernel_pytorch.hardware_abstraction` does not pay for what it does not use.
_LAZY_EXPORTS: Dict[str, str] = {
    "default_adapters": "vendor_adapters",
    "auto_detect_best_adapter": "vendor_adapters",
    "NvidiaAdapter": "vendor_adapters",
    "AmdAdapter": "vendor_adapters",
    "IntelAdapter": "vendor_adapters",
    "CpuAdapter": "vendor_adapters",
    "CustomAsicAdapter": "vendor_adapters",
    "OpenCLAdapter": "vendor_adapters",
    "AppleMpsAdapter": "vendor_adapters",
    "theoretical_peak_tflops": "peak_flops",
    "select_device": "selection",
    "explain_selection": "selection",
    "init_process_group_from_mesh": "process_groups",
    "process_group_backend_string": "process_groups",
    "MemoryMonitor": "memory_monitor",
    "MemoryEvent": "memory_monitor",
    "device_memory_usage": "memory_monitor",
    "set_error_handler": "error_handler",
    "get_error_handler": "error_handler",
}

__all__ = [
    "BYTES_PER_GB",
    "PRECISIONS",
    "DeviceLink",
    "DeviceSpec",
    "HardwareAbstractionLayer",
    "HardwareCapabilities",
    "HardwareVendor",
    "VendorAdapter",
    "precision_key",
    *_LAZY_EXPORTS,
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
