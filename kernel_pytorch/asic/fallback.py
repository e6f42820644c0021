"""Observing the CPU fallback: which ATen ops ran as CPU kernels on my_asic.

Ops without a native my_asic kernel run their CPU kernel (in place on device
memory when the runtime allows it). ``MY_ASIC_FALLBACK=warn`` warns once per
op, ``MY_ASIC_FALLBACK=raise`` makes such ops raise instead;
``set_fallback_mode`` changes this at run time.
"""

from typing import Dict, List

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
    reach the fallback. Other runtimes report an empty list: their ops fall
    back, or use the runtime's own kernels (kernel_pytorch.ops). Initialises
    the device.
    """
    from kernel_pytorch.asic._lazy import _lazy_init

    _lazy_init()
    names, _ = _C._native_kernels()
    return sorted(names)
