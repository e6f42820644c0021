"""One device error handler for every device kind the HAL drives.

    >>> from kernel_pytorch.hardware_abstraction import set_error_handler
    >>> set_error_handler(lambda error: print(error.device, error.kind, error.message))

``fn(error)`` receives a :class:`kernel_pytorch.asic.DeviceError` (device,
kind, message, op, requested_bytes, retryable):

- my_asic: every device error (out_of_memory / kernel / copy / runtime),
  before it reaches user code; returning True retries a failed allocation
  once (``torch.my_asic.set_error_handler``).
- CUDA: out-of-memory errors, through the CUDA caching allocator's OOM
  observer, before ``torch.OutOfMemoryError`` is raised; CUDA offers no retry
  hook, so ``retryable`` is False there, and kernel errors surface as
  exceptions only (CUDA reports them asynchronously, with no callback).
  The handler runs inside the caching allocator's failing allocation: it
  should record and decide, and leave freeing CUDA memory (dropping tensors,
  ``empty_cache``) to the code that catches ``torch.OutOfMemoryError``.
- CPU: no device errors to report (allocation failures are MemoryError).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

_handler: Optional[Callable] = None
_cuda_observer_attached = False


def _on_cuda_oom(device: int, alloc: int, device_allocated: int, device_free: int) -> None:
    handler = _handler
    if handler is None:
        return
    from kernel_pytorch.asic.errors import DeviceError

    handler(
        DeviceError(
            device=f"cuda:{device}",
            kind="out_of_memory",
            message=(
                f"CUDA out of memory on cuda:{device}: tried to allocate {alloc} bytes; "
                f"{device_allocated} bytes allocated by PyTorch, {device_free} bytes free"
            ),
            op="allocation",
            requested_bytes=int(alloc),
            retryable=False,
        )
    )


def set_error_handler(handler: Optional[Callable]) -> None:
    """Installs ``handler`` for my_asic (if registered) and CUDA (if available); None removes it."""
    global _handler, _cuda_observer_attached
    if handler is not None and not callable(handler):
        raise TypeError(f"set_error_handler: expected a callable or None, got {type(handler).__name__}")
    _handler = handler
    my_asic = getattr(torch, "my_asic", None)
    if my_asic is not None and hasattr(my_asic, "set_error_handler"):
        my_asic.set_error_handler(handler)
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if handler is not None and attach is not None and torch.cuda.is_available() and not _cuda_observer_attached:
        # Observers cannot be detached: one forwards to whichever handler is installed.
        attach(_on_cuda_oom)
        _cuda_observer_attached = True


def get_error_handler() -> Optional[Callable]:
    """The handler installed through this module, or None."""
    return _handler
