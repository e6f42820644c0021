"""The built-in vendor adapters, one module per vendor.

Adding a vendor: write ``<vendor>.py`` here (the module name is the vendor's value) with a
:class:`VendorAdapter` subclass listed in the module's ``__all__``: its class attributes
state the vendor's facts (torch device type, backend name, process-group backend,
aliases, priority) and its ``discover_devices`` imports the vendor runtime lazily,
returning ``[]`` with a reason when it is missing. The registry (``registry.py``) loads
it by name; an out-of-tree adapter ships as a package with an entry point instead.
"""

from __future__ import annotations

from typing import List, Optional

from ..hal_core import HardwareVendor, VendorAdapter
from ..registry import HardwareAbstractionLayer, default_adapters
from ..selection import select_device
from .amd import AmdAdapter
from .apple import AppleMpsAdapter
from .cpu import CpuAdapter
from .custom_asic import CustomAsicAdapter
from .intel import IntelAdapter
from .nvidia import NvidiaAdapter
from .opencl import OpenCLAdapter

__all__ = [
    "AmdAdapter", "AppleMpsAdapter", "CpuAdapter", "CustomAsicAdapter", "IntelAdapter", "NvidiaAdapter",
    "OpenCLAdapter", "default_adapters", "auto_detect_best_adapter",
]


def auto_detect_best_adapter(adapters: Optional[List[VendorAdapter]] = None) -> VendorAdapter:
    """The adapter of the device :func:`~..selection.select_device` picks for a job with
    no memory or compute requirement (bf16): the highest-priority vendor with a
    torch-usable device of known bf16 peak, simulated devices after real ones.

    Falls back to the CPU adapter (of ``adapters``, else a new one); never returns None.
    """
    hal = HardwareAbstractionLayer(adapters)
    best = select_device(hal.devices, 0, 0, "bf16")
    vendor = HardwareVendor.CPU if best is None else best.vendor
    return next((a for a in hal.adapters if a.vendor is vendor), None) or CpuAdapter()
