"""Device queries and selection (the torch.cuda names)."""

from typing import Any, Optional, Union

import torch

from kernel_pytorch import _C
from kernel_pytorch.asic._lazy import _lazy_init

_DeviceLike = Union[torch.device, str, int, None]


def is_available() -> bool:
    """Whether at least one my_asic device can be used.

    Loads the device runtime if it isn't yet (like CUDA's driver init) and
    returns False, rather than raising, when it cannot be loaded.
    """
    if _C._in_bad_fork():
        return False
    return _C._device_count() > 0


def is_simulated() -> bool:
    """Whether the loaded device runtime is kernel_pytorch's bundled simulator.

    The simulator (``lib/libmyasic.so``) keeps "device" memory in host RAM and runs torch's
    CPU kernels in place, so it exercises the device stack but is never faster than the
    host CPU.  False for a chip's own runtime (``register_custom_device`` or
    ``MY_ASIC_RUNTIME``).  Loads the runtime if it is not loaded yet.
    """
    import os

    from kernel_pytorch.asic.registration import BUNDLED_RUNTIME

    _lazy_init()
    library = _C._runtime_library()
    return bool(library) and os.path.realpath(library) == os.path.realpath(BUNDLED_RUNTIME)


def device_count() -> int:
    """Number of my_asic devices (0 when the runtime cannot be loaded)."""
    if _C._in_bad_fork():
        return 0
    return _C._device_count()


# torch.device and the C++ API hold device indices as int8.
_MAX_DEVICE_INDEX = 127


def _checked_index(index: int) -> int:
    """``index`` if it fits a device index, else RuntimeError as on CUDA (never a wrapped value)."""
    if 0 <= index <= _MAX_DEVICE_INDEX:
        return index
    count = device_count()
    raise RuntimeError(
        f"my_asic: invalid device index {index}: this process has {count} my_asic device(s) "
        f"(valid indices 0..{count - 1}). Check torch.my_asic.device_count()."
    )


def _device_index(device: _DeviceLike, optional: bool = True) -> int:
    """Normalises ``device`` to an index; ``None`` means the current device.

    Ints and ``"my_asic:N"`` strings are range-checked here, before anything
    narrows them to int8 (``torch.device("my_asic:256")`` is ``my_asic:0``).
    """
    if device is None:
        if not optional:
            raise ValueError("a my_asic device is required")
        return current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return _checked_index(device)
    if isinstance(device, str):
        kind, colon, index = device.partition(":")
        if kind == "my_asic" and colon and index.isdigit():
            return _checked_index(int(index))
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "my_asic":
            raise ValueError(f"expected a my_asic device, got {device}")
        return current_device() if device.index is None else device.index
    raise TypeError(f"expected a my_asic device (int, str or torch.device), got {type(device).__name__}")


def current_device() -> int:
    """Index of the calling thread's current my_asic device."""
    _lazy_init()
    return _C._get_device()


def set_device(device: _DeviceLike) -> None:
    """Makes ``device`` the calling thread's current my_asic device."""
    index = _device_index(device)
    _lazy_init()
    _C._set_device(index)


class device:
    """Context manager that changes the current device (``torch.cuda.device``)."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx == -1:
            return self
        self.prev_idx = current_device()
        if self.prev_idx != self.idx:
            _C._set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx != -1 and self.prev_idx != self.idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor ``obj`` current."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "my_asic" else None)


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work on every stream of ``device``."""
    _lazy_init()
    _C._synchronize(_device_index(device))


class _MyAsicDeviceProperties:
    """Properties of one device, named as torch.cuda's are.

    ``total_memory`` is in bytes.
    """

    __slots__ = ("name", "total_memory", "multi_processor_count", "host_addressable", "index")

    def __init__(self, index: int, props: dict):
        self.index = index
        self.name = props["name"]
        self.total_memory = props["total_memory"]
        self.multi_processor_count = props["multi_processor_count"]
        self.host_addressable = props["host_addressable"]

    def __repr__(self) -> str:
        return (
            f"_MyAsicDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1 << 20)}MB, "
            f"multi_processor_count={self.multi_processor_count}, host_addressable={self.host_addressable})"
        )


def get_device_properties(device: _DeviceLike = None) -> _MyAsicDeviceProperties:
    """Properties of ``device`` (name, total_memory in bytes, compute units)."""
    _lazy_init()
    index = _device_index(device)
    return _MyAsicDeviceProperties(index, _C._get_device_properties(index))


def get_device_name(device: _DeviceLike = None) -> str:
    """Name of ``device`` as its runtime reports it."""
    return get_device_properties(device).name

