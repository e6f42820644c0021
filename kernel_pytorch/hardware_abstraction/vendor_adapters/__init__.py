"""The built-in vendor adapters, one module per vendor, named by the vendor's value.

The registry (``registry.py``) loads each module by name and takes the
:class:`VendorAdapter` subclass in its ``__all__``; docs/vendor_adapters.md says how to
add a vendor, or ship an adapter as a package.
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
