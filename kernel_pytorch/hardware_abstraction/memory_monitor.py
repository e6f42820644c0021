"""Watches a device's memory use against a warning and a critical threshold.

    >>> from kernel_pytorch.hardware_abstraction import MemoryMonitor
    >>> with MemoryMonitor("my_asic:0", warning=0.90, critical=0.95, interval_s=0.5) as monitor:
    ...     train()                     # callbacks fire from a background thread

Usage is the fraction of the device's memory in use: for my_asic and CUDA the
device's total minus its free memory (``mem_get_info``: this process's cached
blocks and other processes count, as they keep the memory from others); for
the CPU the process's resident set against the machine's physical memory.

A callback fires once per upward crossing, not per sample: after a warning the
level must fall ``hysteresis`` below the warning threshold before another
warning can fire (same for critical). A jump from normal straight past the
critical threshold fires the warning callback, then the critical one. Without
callbacks, crossings are logged through :mod:`logging` (logger
``kernel_pytorch.memory``). On my_asic the allocator also checks the critical
and warning levels when it reserves new device memory (a spike between two
samples is seen); the timer then only catches memory freed or taken by others.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Tuple, Union

import torch

LOGGER = logging.getLogger("kernel_pytorch.memory")

LEVELS = ("normal", "warning", "critical")


@dataclass(frozen=True)
class MemoryEvent:
    """One threshold crossing.

    ``level`` is "warning" or "critical" (a rise) or "normal" (back below the
    warning threshold minus the hysteresis). Bytes are bytes; ``fraction`` is
    used / total in [0, 1].
    """

    device: str
    level: str
    threshold: float
    fraction: float
    used_bytes: int
    total_bytes: int
    peak_bytes: int
    source: str  # "timer", "allocation" or "check" (an explicit check() call)


def _device(device: Union[str, int, torch.device, None]) -> torch.device:
    if device is None:
        return torch.device("cpu")
    if isinstance(device, int):
        return torch.device("my_asic", device)
    d = torch.device(device)
    if d.type != "cpu" and d.index is None:
        d = torch.device(d.type, 0)
    return d


def _cpu_usage() -> Tuple[int, int]:
    """(resident bytes of this process, physical memory bytes of the machine)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1]) * page
    return resident, total


def device_memory_usage(device: Union[str, int, torch.device, None]) -> Tuple[int, int]:
    """(used bytes, total bytes) of ``device`` as MemoryMonitor reads it."""
    d = _device(device)
    if d.type == "cpu":
        return _cpu_usage()
    module = getattr(torch, d.type, None)
    if module is None or not hasattr(module, "mem_get_info"):
        raise ValueError(
            f"MemoryMonitor: no memory information for device type '{d.type}' "
            "(supported: my_asic, cuda, any torch.<type> with mem_get_info, cpu)"
        )
    free, total = module.mem_get_info(d.index)
    return total - free, total


class MemoryMonitor:
    """Calls back when a device's memory use crosses the warning or critical fraction.

    Args:
        device: "my_asic:0", "cuda:1", "cpu", a torch.device or a my_asic index.
        warning, critical: fractions of the device's total memory, 0 < warning <= critical <= 1.
        interval_s: seconds between background samples (after start()).
        on_warning, on_critical: ``fn(event: MemoryEvent)``; default: log a warning / an error.
        on_normal: ``fn(event)`` when use falls back below the warning level; default: log at info.
        hysteresis: how far (a fraction of total memory) use must fall below a
            threshold before that threshold can fire again.
    """

    def __init__(
        self,
        device: Union[str, int, torch.device, None] = "my_asic:0",
        warning: float = 0.90,
        critical: float = 0.95,
        interval_s: float = 1.0,
        on_warning: Optional[Callable[[MemoryEvent], None]] = None,
        on_critical: Optional[Callable[[MemoryEvent], None]] = None,
        on_normal: Optional[Callable[[MemoryEvent], None]] = None,
        hysteresis: float = 0.02,
    ):
        if not 0.0 < warning <= critical <= 1.0:
            raise ValueError(
                f"MemoryMonitor: need 0 < warning <= critical <= 1, got warning={warning}, critical={critical}"
            )
        if interval_s <= 0:
            raise ValueError(f"MemoryMonitor: interval_s must be > 0 seconds, got {interval_s}")
        if not 0.0 <= hysteresis < 1.0:
            raise ValueError(f"MemoryMonitor: hysteresis must be a fraction in [0, 1), got {hysteresis}")
        self.device = _device(device)
        device_memory_usage(self.device)  # fails now, not in the thread, for an unsupported device
        self.warning = warning
        self.critical = critical
        self.interval_s = interval_s
        self.hysteresis = hysteresis
        self._callbacks = {
            "warning": on_warning or self._log,
            "critical": on_critical or self._log,
            "normal": on_normal or self._log,
        }
        self.level = "normal"
        self.peak_bytes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._allocation_hook = None

    # -- sampling -----------------------------------------------------------------

    def check(self, source: str = "check") -> Optional[str]:
        """Reads usage once and fires the callbacks of any crossing; returns the level now."""
        used, total = device_memory_usage(self.device)
        self._observe(used, total, source)
        return self.level

    def _observe(self, used: int, total: int, source: str) -> None:
        fraction = used / total if total else 0.0
        fired = []
        with self._lock:
            self.peak_bytes = max(self.peak_bytes, used)
            rank = LEVELS.index(self.level)
            # Down: only past the hysteresis band of the level's threshold.
            while rank > 0 and fraction < self._threshold(LEVELS[rank]) - self.hysteresis:
                rank -= 1
            if rank == 0 and self.level != "normal":
                fired.append("normal")
            # Up: each threshold crossed fires, in order.
            for candidate in (1, 2):
                if rank < candidate and fraction >= self._threshold(LEVELS[candidate]):
                    rank = candidate
                    fired.append(LEVELS[candidate])
            self.level = LEVELS[rank]
            peak = self.peak_bytes
        for level in fired:
            threshold = self._threshold(level) if level != "normal" else self.warning
            event = MemoryEvent(str(self.device), level, threshold, fraction, used, total, peak, source)
            self._callbacks[level](event)

    def _threshold(self, level: str) -> float:
        return self.critical if level == "critical" else self.warning

    @staticmethod
    def _log(event: MemoryEvent) -> None:
        log = {"critical": LOGGER.error, "warning": LOGGER.warning}.get(event.level, LOGGER.info)
        log(
            "%s memory %s: %.1f%% used (%.2f of %.2f GiB, peak %.2f GiB; threshold %.0f%%)",
            event.device, event.level, 100 * event.fraction, event.used_bytes / 2**30,
            event.total_bytes / 2**30, event.peak_bytes / 2**30, 100 * event.threshold,
        )

    # -- background thread ------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the background sampler is running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "MemoryMonitor":
        """Starts sampling every ``interval_s`` seconds (and, on my_asic, on allocation)."""
        if self.running:
            return self
        self._stop.clear()
        # The first sample is taken here, on the caller's thread: a sampler thread
        # starting with a sample would compete for the GIL with the code that just
        # started the monitor (on a loaded machine each hand-over costs a time slice).
        self._sample()
        self._thread = threading.Thread(target=self._run, name=f"MemoryMonitor({self.device})", daemon=True)
        self._thread.start()
        self._attach_allocation_hook()
        return self

    def stop(self) -> None:
        """Stops sampling; waits for the sampler thread to finish."""
        self._detach_allocation_hook()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _sample(self) -> None:
        try:
            self.check("timer")
        except Exception:  # noqa: BLE001 -- a monitor must not die on one bad sample
            LOGGER.exception("MemoryMonitor(%s): sampling failed", self.device)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _attach_allocation_hook(self) -> None:
        if self.device.type != "my_asic":
            return
        from kernel_pytorch.asic import memory as asic_memory

        attach = getattr(asic_memory, "_add_usage_watch", None)
        if attach is not None:
            self._allocation_hook = attach(
                self.device.index, self.warning, lambda used, total: self._observe(used, total, "allocation")
            )

    def _detach_allocation_hook(self) -> None:
        if self._allocation_hook is not None:
            from kernel_pytorch.asic import memory as asic_memory

            asic_memory._remove_usage_watch(self._allocation_hook)
            self._allocation_hook = None

    def __enter__(self) -> "MemoryMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"MemoryMonitor({self.device}, warning={self.warning}, critical={self.critical}, "
            f"interval_s={self.interval_s}, level={self.level!r}, running={self.running})"
        )
