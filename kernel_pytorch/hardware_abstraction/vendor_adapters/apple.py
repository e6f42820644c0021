"""Apple silicon adapter: the GPU behind torch's MPS backend.

Memory is unified with the CPU: ``torch.mps.recommended_max_memory()`` (Metal's
recommended working set, about 3/4 of RAM) is the capacity torch can use, and what the
MPS driver has already allocated is subtracted for the free figure.  The chip name comes
from ``sysctl`` and the GPU core count from the IORegistry (``ioreg``), both macOS tools.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from ..hal_core import BYTES_PER_GB, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter
from ..peak_flops import datasheet_clock_mhz, theoretical_peak_tflops

__all__ = ["AppleMpsAdapter"]

_MPS_DTYPES = ["fp32", "fp16", "bf16"]  # MPS has no fp64


def _run_macos_tool(command: Sequence[str]) -> str:
    try:
        return subprocess.run(list(command), capture_output=True, text=True, timeout=5,
                              check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


class AppleMpsAdapter(VendorAdapter):
    """Discovers the Apple GPU as ``mps`` when torch's MPS backend is available.

    Args:
        mps_runtime: a ``torch.mps``-like object (``recommended_max_memory``,
            ``driver_allocated_memory``); default ``torch.mps``.
        is_available: replaces ``torch.backends.mps.is_available``.
        run_tool: runs a macOS command and returns its stdout (``sysctl``, ``ioreg``).
    """

    vendor = HardwareVendor.APPLE
    device_type, backend, process_group_backend = "mps", "mps", "gloo"
    aliases = ("mps",)
    priority = 40

    def __init__(self, mps_runtime: Any = None, is_available: Optional[Callable[[], bool]] = None,
                 run_tool: Callable[[Sequence[str]], str] = _run_macos_tool) -> None:
        super().__init__()
        self._mps_runtime = mps_runtime
        self._is_available = is_available
        self._run_tool = run_tool

    def discover_devices(self) -> List[DeviceSpec]:
        """The ``mps`` device; [] with a reason off Apple silicon."""
        available = self._is_available or torch.backends.mps.is_available
        if not available():
            built = torch.backends.mps.is_built()
            self._unavailable_reason = (
                "torch.backends.mps.is_available() is False ("
                + ("not an Apple-silicon Mac with macOS 12.3+" if built else
                   "this torch build has no MPS support") + ")"
            )
            return []
        runtime = self._mps_runtime if self._mps_runtime is not None else torch.mps
        chip = self._run_tool(["sysctl", "-n", "machdep.cpu.brand_string"]).strip() or "Apple GPU"
        match = re.search(r'"gpu-core-count"\s*=\s*(\d+)',
                          self._run_tool(["ioreg", "-rd1", "-c", "AGXAccelerator"]))
        cores = int(match.group(1)) if match else 0
        total = int(runtime.recommended_max_memory())
        free = max(total - int(runtime.driver_allocated_memory()), 0)
        clock_mhz = datasheet_clock_mhz(HardwareVendor.APPLE, chip)
        details: Dict[str, Any] = {
            "memory_source": "torch.mps.recommended_max_memory - driver_allocated_memory",
            "gpu_core_source": "ioreg AGXAccelerator gpu-core-count" if match else "unavailable",
        }
        if clock_mhz and cores:
            peak = theoretical_peak_tflops(HardwareVendor.APPLE, "apple-gpu", cores, clock_mhz)
            details["peak_source"] = f"{cores} GPU cores x {clock_mhz:.0f} MHz x 256 FLOP/clk/core"
        else:
            peak = {}
            details["peak_source"] = "unavailable: chip not in the clock table or core count unknown"
        caps = HardwareCapabilities(
            device_name=f"{chip} GPU",
            vendor=HardwareVendor.APPLE,
            architecture="apple-gpu",
            compute_capability=None,
            memory_total_gb=total / BYTES_PER_GB,
            memory_free_gb=free / BYTES_PER_GB,
            compute_units=cores,
            clock_mhz=clock_mhz,
            peak_tflops=peak,
            supported_dtypes=list(_MPS_DTYPES),
            details=details,
        )
        self._unavailable_reason = None
        return [DeviceSpec(HardwareVendor.APPLE, 0, torch.device("mps"), caps)]
