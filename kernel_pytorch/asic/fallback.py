"""Observing the CPU fallback: which ATen ops ran as CPU kernels on my_asic.

Ops without a native my_asic kernel run their CPU kernel (in place on device
memory when the runtime allows it). ``MY_ASIC_FALLBACK=warn`` warns once per
op, ``MY_ASIC_FALLBACK=raise`` makes such ops raise instead;
``set_fallback_mode`` changes this at run time.
"""

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Tuple

from kernel_pytorch import _C

_MODES = ("allow", "warn", "raise")


def fallback_stats() -> Dict[str, int]:
    """Number of calls per op name (e.g. 'aten::add.Tensor') that fell back."""
    return dict(sorted(_C._fallback_stats().items()))


def reset_fallback_stats() -> None:
    """Sets every fallback counter back to zero."""
    _C._reset_fallback_stats()


def set_fallback_mode(mode: str) -> None:
    """'allow' (default), 'warn' (once per op) or 'raise'."""
    if mode not in _MODES:
        raise ValueError(f"fallback mode must be one of {_MODES}, got {mode!r}")
    _C._set_fallback_mode(mode)


def get_fallback_mode() -> str:
    """The current fallback mode."""
    return _C._get_fallback_mode()


def native_kernels() -> List[str]:
    """ATen ops (e.g. 'add.Tensor') that run as native my_asic kernels.

    With a host-addressable runtime (the reference simulator) the hot ops of a
    training step run ATen's CPU kernels directly on device memory and never
    reach the fallback. Other runtimes list the ATen ops routed to the
    runtime's core-op kernels (mm, addmm, bmm, baddbmm through its ``gemm``
    entry, where it has one); their other ops fall back. Initialises the
    device.
    """
    from kernel_pytorch.asic._lazy import _lazy_init

    _lazy_init()
    names, _ = _C._native_kernels()
    return sorted(names)


@dataclass(frozen=True)
class FallbackRow:
    """One op that ran through the CPU fallback: calls and bytes copied
    between host and device memory (0 where device memory is host addressable)."""

    op: str
    calls: int
    bytes_copied: int


@dataclass
class FallbackReport:
    """Which ops of a piece of code fell back to the CPU, most bytes first.

    ``str(report)`` is a table op -> calls -> bytes copied (MiB = 2**20 bytes);
    ``result`` is what the traced function returned (None for ``track_fallbacks``).
    """

    rows: List[FallbackRow] = field(default_factory=list)
    result: Any = None

    @property
    def total_calls(self) -> int:
        return sum(r.calls for r in self.rows)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes_copied for r in self.rows)

    def __str__(self) -> str:
        if not self.rows:
            return "my_asic: no op fell back to the CPU."
        width = max(len("op"), *(len(r.op) for r in self.rows))
        lines = [f"{'op':<{width}}  {'calls':>8}  {'MiB copied':>12}"]
        for r in self.rows:
            lines.append(f"{r.op:<{width}}  {r.calls:>8}  {r.bytes_copied / 2**20:>12.3f}")
        lines.append(f"{'total':<{width}}  {self.total_calls:>8}  {self.total_bytes / 2**20:>12.3f}")
        return "\n".join(lines)


def _records() -> Dict[str, Tuple[int, int]]:
    return {op: (calls, nbytes) for op, calls, nbytes in _C._fallback_records()}


def _difference(before: Dict[str, Tuple[int, int]], after: Dict[str, Tuple[int, int]]) -> List[FallbackRow]:
    rows = []
    for op, (calls, nbytes) in after.items():
        c0, b0 = before.get(op, (0, 0))
        if calls > c0:
            rows.append(FallbackRow(op, calls - c0, nbytes - b0))
    rows.sort(key=lambda r: (-r.bytes_copied, -r.calls, r.op))
    return rows


@contextmanager
def track_fallbacks() -> Iterator[FallbackReport]:
    """Context manager: the yielded report lists the ops that fell back inside
    the block (filled when the block exits). Other threads' fallbacks during
    the block are counted too; the global counters are left as they were."""
    report = FallbackReport()
    before = _records()
    try:
        yield report
    finally:
        report.rows = _difference(before, _records())


def fallback_report(fn: Callable[..., Any], *args: Any, print_report: bool = True, **kwargs: Any) -> FallbackReport:
    """Runs ``fn(*args, **kwargs)`` and reports which ATen ops fell back to
    the CPU during it: op -> calls -> bytes copied between host and device.

    Prints the table unless ``print_report=False``; the returned report holds
    the rows and ``fn``'s result. Example::

        report = kernel_pytorch.asic.fallback_report(lambda: model(x).sum().backward())
    """
    with track_fallbacks() as report:
        report.result = fn(*args, **kwargs)
    if print_report:
        print(report)
    return report
