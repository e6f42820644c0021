"""One adapter per vendor, and the default set the HAL runs.

Adding a vendor: write ``<vendor>.py`` with a :class:`VendorAdapter` subclass whose
``discover_devices`` imports the vendor runtime lazily and returns ``[]`` with a reason
when it is missing, then add it to :func:`default_adapters`.
"""

from __future__ import annotations

from typing import List, Optional

from ..hal_core import HardwareVendor, VendorAdapter
from .amd import AmdAdapter
from .apple import AppleMpsAdapter
from .cpu import CpuAdapter
from .custom_asic import CustomAsicAdapter
from .intel import IntelAdapter
from .nvidia import NvidiaAdapter
from .opencl import OpenCLAdapter

__all__ = [
    "AmdAdapter",
    "AppleMpsAdapter",
    "CpuAdapter",
    "CustomAsicAdapter",
    "IntelAdapter",
    "NvidiaAdapter",
    "OpenCLAdapter",
    "default_adapters",
    "auto_detect_best_adapter",
]


def default_adapters() -> List[VendorAdapter]:
    """A fresh instance of every built-in adapter, accelerators first, CPU and OpenCL last."""
    return [
        NvidiaAdapter(),
        AmdAdapter(),
        IntelAdapter(),
        AppleMpsAdapter(),
        CustomAsicAdapter(),
        CpuAdapter(),
        OpenCLAdapter(),
    ]


def auto_detect_best_adapter(adapters: Optional[List[VendorAdapter]] = None) -> VendorAdapter:
    """The adapter whose torch-usable devices have the highest bf16 peak (TFLOPS).

    Ties go to the adapter listed first (accelerators come before the CPU in
    :func:`default_adapters`).  Simulated devices (my_asic on its bundled simulator runs
    on the host CPU) do not count.  Falls back to the CPU adapter when no adapter reports
    a bf16 peak; never returns None.
    """
    adapters = default_adapters() if adapters is None else list(adapters)
    best: Optional[VendorAdapter] = None
    best_peak = 0.0
    for adapter in adapters:
        peaks = [spec.capabilities.peak_tflops.get("bf16") or 0.0
                 for spec in adapter.discover_devices() if spec.torch_usable and not spec.is_simulated]
        if peaks and max(peaks) > best_peak:
            best, best_peak = adapter, max(peaks)
    if best is not None:
        return best
    for adapter in adapters:
        if adapter.vendor is HardwareVendor.CPU:
            return adapter
    return CpuAdapter()
