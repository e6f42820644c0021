"""Process-wide run settings (threads, autocast precision, memory cap) applied and undone as one.

Scripts tend to set ``torch.set_num_threads``, enter ``torch.autocast`` and cap
allocator memory in three places and undo them in none. ``SystemProfile``
bundles the three so they are applied together and restored together::

    with SystemProfile(num_threads=8, precision="bf16", memory_limit=8 * 2**30, device="cuda:0"):
        model(batch)

All three settings are process-global in PyTorch (thread pool size, per-device
allocator fraction) or thread-local (autocast), so apply one profile at a time
and restore it on the thread that applied it.
"""

from __future__ import annotations

import types
from typing import Optional, Union

import torch

from .hal_core import BYTES_PER_GIB, precision_key

__all__ = ["SystemProfile", "PROFILE_PRECISIONS"]

#: precision key -> dtype autocast runs matmuls in; "fp32" means no autocast.
PROFILE_PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}



def _device_module(device_type: str) -> Optional[types.ModuleType]:
    """The ``torch.<type>`` module when it offers a per-process allocator cap (cuda, my_asic)."""
    module = getattr(torch, device_type, None)
    if isinstance(module, types.ModuleType) and hasattr(module, "set_per_process_memory_fraction"):
        return module
    return None


class SystemProfile:
    """Thread count, autocast precision and memory cap for one device, applied as a unit.

    Args:
        num_threads: intra-op CPU threads (``torch.set_num_threads``); None
            leaves the current setting.
        precision: ``"fp32"`` (no autocast), ``"bf16"`` or ``"fp16"`` (autocast
            to that dtype on ``device``); torch dtypes are accepted too.
        memory_limit: cap in bytes on what this process may allocate on
            ``device``. On devices whose torch module has
            ``set_per_process_memory_fraction`` (cuda, my_asic) the allocator
            enforces it; elsewhere (cpu) PyTorch has no allocator cap, so the
            limit is recorded and enforced by :meth:`check_allocation`.
        device: the device the profile is for; default ``cpu``.
    """

    def __init__(
        self,
        num_threads: Optional[int] = None,
        precision: Union[str, torch.dtype] = "fp32",
        memory_limit: Optional[int] = None,
        device: Union[str, torch.device, None] = None,
    ) -> None:
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads <= 0):
            raise ValueError(f"num_threads must be a positive integer or None, got {num_threads!r}")
        key = precision_key(precision)
        if key not in PROFILE_PRECISIONS:
            raise ValueError(
                f"precision {precision!r} is not a SystemProfile precision; use one of {sorted(PROFILE_PRECISIONS)}"
            )
        if memory_limit is not None and (isinstance(memory_limit, bool) or not isinstance(memory_limit, int) or memory_limit <= 0):
            raise ValueError(f"memory_limit must be a positive number of bytes (int) or None, got {memory_limit!r}")
        self.num_threads = num_threads
        self.precision = key
        self.memory_limit = memory_limit
        self.device = torch.device("cpu" if device is None else device)
        self._applied = False
        self._saved_num_threads: Optional[int] = None
        self._saved_memory_fraction: Optional[float] = None
        self._autocast: Optional[torch.autocast] = None

    @property
    def autocast_dtype(self) -> torch.dtype:
        """The dtype autocast computes in under this profile (float32 means autocast off)."""
        return PROFILE_PRECISIONS[self.precision]

    @property
    def memory_cap_enforced_by_allocator(self) -> bool:
        """True when ``memory_limit`` is handed to the device allocator rather than only recorded."""
        return self.memory_limit is not None and _device_module(self.device.type) is not None

    @property
    def is_applied(self) -> bool:
        return self._applied

    def apply(self) -> "SystemProfile":
        """Set the thread count, cap device memory and enter autocast; returns self.

        Raises:
            RuntimeError: the profile is already applied, or autocast is not
                available for ``device``'s type.
            ValueError: ``memory_limit`` exceeds the device's total memory.
        """
        if self._applied:
            raise RuntimeError("SystemProfile is already applied; call restore() before applying it again")
        if self.precision != "fp32" and not torch.amp.is_autocast_available(self.device.type):
            raise RuntimeError(
                f"autocast is not available for device type {self.device.type!r}; "
                f"use precision='fp32' or a device type with autocast support"
            )
        # Check and set the memory cap before touching anything else, so a bad
        # limit leaves no half-applied state behind.
        self._apply_memory_cap()
        if self.num_threads is not None:
            self._saved_num_threads = torch.get_num_threads()
            torch.set_num_threads(self.num_threads)
        if self.precision != "fp32":
            self._autocast = torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)
            self._autocast.__enter__()
        self._applied = True
        return self

    def restore(self) -> None:
        """Undo :meth:`apply`: leave autocast, restore the thread count and the allocator fraction."""
        if not self._applied:
            raise RuntimeError("SystemProfile.restore() called but the profile is not applied")
        if self._autocast is not None:
            self._autocast.__exit__(None, None, None)
            self._autocast = None
        if self._saved_num_threads is not None:
            torch.set_num_threads(self._saved_num_threads)
            self._saved_num_threads = None
        if self._saved_memory_fraction is not None:
            module = _device_module(self.device.type)
            module.set_per_process_memory_fraction(self._saved_memory_fraction, self._device_index())
            self._saved_memory_fraction = None
        self._applied = False

    def check_allocation(self, nbytes: int) -> None:
        """Raise ``MemoryError`` when allocating ``nbytes`` would exceed ``memory_limit``.

        This is how the cap is enforced on devices without an allocator cap
        (cpu); on cuda/my_asic it gives the same answer before the allocator
        would fail.
        """
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if self.memory_limit is not None and nbytes > self.memory_limit:
            shortfall = nbytes - self.memory_limit
            raise MemoryError(
                f"allocation of {nbytes} bytes ({nbytes / BYTES_PER_GIB:.2f} GiB) exceeds this SystemProfile's "
                f"memory_limit of {self.memory_limit} bytes ({self.memory_limit / BYTES_PER_GIB:.2f} GiB) on "
                f"{self.device} by {shortfall} bytes ({shortfall / BYTES_PER_GIB:.2f} GiB); raise memory_limit or shrink the allocation"
            )

    def __enter__(self) -> "SystemProfile":
        return self.apply()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def __repr__(self) -> str:
        return (
            f"SystemProfile(num_threads={self.num_threads}, precision={self.precision!r}, "
            f"memory_limit={self.memory_limit}, device={str(self.device)!r})"
        )

    def _device_index(self) -> int:
        return 0 if self.device.index is None else self.device.index

    def _apply_memory_cap(self) -> None:
        module = _device_module(self.device.type)
        if self.memory_limit is None or module is None:
            return
        index = self._device_index()
        total_bytes = module.get_device_properties(index).total_memory
        if self.memory_limit > total_bytes:
            raise ValueError(
                f"memory_limit {self.memory_limit} bytes ({self.memory_limit / BYTES_PER_GIB:.2f} GiB) exceeds the "
                f"{total_bytes} bytes ({total_bytes / BYTES_PER_GIB:.2f} GiB) of {self.device}; use a limit <= the device total"
            )
        # The previous fraction is restored on restore(); modules without a
        # getter started uncapped as far as we can tell, i.e. fraction 1.0.
        getter = getattr(module, "get_per_process_memory_fraction", None)
        self._saved_memory_fraction = float(getter(index)) if getter is not None else 1.0
        module.set_per_process_memory_fraction(self.memory_limit / total_bytes, index)
