"""The device error handler: ``torch.my_asic.set_error_handler(fn)``.

``fn(error: DeviceError)`` runs before a device error reaches user code: an
allocation the device cannot serve, a failed runtime kernel, a failed copy or
any other failing runtime call (including asynchronous stream work, which
reports at the next synchronising call). For an out-of-memory allocation the
handler may free memory (``torch.my_asic.empty_cache()``, dropping tensors it
owns) and return True to have the allocation retried once; if the retry fails
too, the usual ``torch.OutOfMemoryError`` reaches the caller. For other errors
the return value is ignored and the exception follows. Errors raised while the
handler runs go straight to it (no recursion); an exception from the handler
itself is reported as a warning and the original error goes on.

    >>> def handler(error):
    ...     if error.kind == "out_of_memory":
    ...         torch.my_asic.empty_cache()
    ...         return True
    >>> torch.my_asic.set_error_handler(handler)
"""

from dataclasses import dataclass
from typing import Callable, Optional

from kernel_pytorch import _C

KINDS = ("out_of_memory", "kernel", "copy", "runtime")


@dataclass(frozen=True)
class DeviceError:
    """One device error as the handler sees it.

    ``kind`` is one of "out_of_memory", "kernel", "copy", "runtime" (any other
    runtime call); ``op`` names the runtime call, kernel ("kernel rms_norm") or
    "allocation"; ``requested_bytes`` is the allocation size for
    out_of_memory; ``retryable`` says whether returning True retries it.
    """

    device: str
    kind: str
    message: str
    op: str
    requested_bytes: int
    retryable: bool


_handler: Optional[Callable[[DeviceError], Optional[bool]]] = None


def _dispatch(info: dict) -> bool:
    handler = _handler
    if handler is None:
        return False
    error = DeviceError(
        device=f"my_asic:{info['device']}" if info["device"] >= 0 else "my_asic",
        kind=info["kind"],
        message=info["message"],
        op=info["op"],
        requested_bytes=int(info["requested_bytes"]),
        retryable=bool(info["retryable"]),
    )
    return bool(handler(error))


def set_error_handler(handler: Optional[Callable[[DeviceError], Optional[bool]]]) -> None:
    """Installs ``handler`` for every my_asic device error (None removes it)."""
    global _handler
    if handler is not None and not callable(handler):
        raise TypeError(f"set_error_handler: expected a callable or None, got {type(handler).__name__}")
    _handler = handler
    _C._set_error_handler(_dispatch if handler is not None else None)


def get_error_handler() -> Optional[Callable[[DeviceError], Optional[bool]]]:
    """The installed handler, or None."""
    return _handler
