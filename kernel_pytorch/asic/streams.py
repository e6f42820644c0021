"""Streams and events (``torch.my_asic.Stream`` / ``Event``).

Both are thin subclasses of ``torch.Stream`` / ``torch.Event``: the work is
done by the device guard in C++, so they behave exactly like the generic
accelerator objects and like torch.cuda's.
"""

from typing import Optional

import torch

from kernel_pytorch import _C
from kernel_pytorch.asic._lazy import _lazy_init
from kernel_pytorch.asic.device import _device_index, _DeviceLike


class Stream(torch.Stream):
    """An in-order queue of device work on one my_asic device.

    Args:
        device: the device (default: current).
        priority: 0 (default) or negative for high priority.
    """

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs):
        _lazy_init()
        if "stream_id" in kwargs:  # rebuilding a known stream
            return super().__new__(cls, **kwargs)
        index = _device_index(device)
        return super().__new__(cls, device=torch.device("my_asic", index), priority=priority)

    @property
    def priority(self) -> int:
        """0 for normal streams, -1 for high-priority ones (as torch.cuda.Stream)."""
        return _C._stream_priority(self.stream_id, self.device_index)

    def __eq__(self, other):
        return isinstance(other, torch.Stream) and super().__eq__(other)

    def __hash__(self):
        return super().__hash__()

    def __repr__(self):
        return f"<torch.my_asic.Stream device=my_asic:{self.device_index} stream_id={self.stream_id}>"


class _EventMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "my_asic"


class Event(metaclass=_EventMeta):
    """A marker in a stream; records completion time when ``enable_timing``.

    Creates a ``torch.Event`` on the current my_asic device, so it works
    everywhere torch.Event does (``Stream.wait_event``, ``elapsed_time``);
    ``isinstance(e, torch.my_asic.Event)`` holds for any my_asic event. (A
    subclass would not do: torch.Event.elapsed_time rejects subclasses.)
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        _lazy_init()
        if interprocess:
            raise ValueError("my_asic events cannot be shared between processes (interprocess=True)")
        return torch.Event(
            device=torch.device("my_asic", _C._get_device()), enable_timing=enable_timing, blocking=blocking
        )


def _wrap(triple) -> Stream:
    stream_id, device_index, device_type = triple
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device: _DeviceLike = None) -> Stream:
    """The calling thread's current stream on ``device``."""
    _lazy_init()
    return _wrap(_C._current_stream(_device_index(device)))


def default_stream(device: _DeviceLike = None) -> Stream:
    """The default stream of ``device``."""
    _lazy_init()
    return _wrap(_C._default_stream(_device_index(device)))


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current on its device for the calling thread."""
    if stream is None:
        return
    if not isinstance(stream, torch.Stream):
        raise TypeError(
            f"torch.my_asic.set_stream expects a stream (torch.my_asic.Stream or torch.Stream), got "
            f"{type(stream).__name__}; create one with torch.my_asic.Stream()."
        )
    if stream.device.type != "my_asic":
        raise ValueError(f"torch.my_asic.set_stream expects a my_asic stream, got one on {stream.device}")
    _lazy_init()
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Context manager that makes ``stream`` current (and its device too)."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self._prev_stream = None
        self._prev_device = None

    def __enter__(self):
        if self.stream is None:
            return self.stream
        _lazy_init()
        self._prev_device = _C._get_device()
        if self.stream.device_index != self._prev_device:
            _C._set_device(self.stream.device_index)
        self._prev_stream = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        set_stream(self._prev_stream)
        if self._prev_device != self.stream.device_index:
            _C._set_device(self._prev_device)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    """``with torch.my_asic.stream(s):`` runs the block with ``s`` current."""
    return StreamContext(stream)
