"""Lazy initialisation of the my_asic runtime, as torch.cuda does it.

Nothing touches the device runtime at import time; the first call that needs a
device loads it (``_lazy_init``). Calls that only configure the device, such as
``manual_seed_all``, are queued until then so that they don't pin the
runtime's configuration early (register_custom_device must still be able to
choose it).
"""

import threading
import traceback
from typing import Callable, List, Tuple

from kernel_pytorch import _C

_lock = threading.RLock()
_queued_calls: List[Tuple[Callable[[], None], str]] = []
_initializing = False


def is_initialized() -> bool:
    """Whether the device runtime has been loaded and initialised."""
    return _C._is_initialized() and not _C._in_bad_fork()


def _is_in_bad_fork() -> bool:
    """True in a child process forked after the parent initialised my_asic."""
    return _C._in_bad_fork()


def _lazy_init() -> None:
    """Loads the device runtime if needed and runs the calls queued before."""
    global _initializing
    if _C._in_bad_fork():
        raise RuntimeError(
            "Cannot re-initialize my_asic in forked subprocess. To use my_asic with "
            "multiprocessing, you must use the 'spawn' start method"
        )
    if _C._device_initialized() and not _queued_calls:
        return
    with _lock:
        if _initializing:
            return  # re-entered from a queued call
        _initializing = True
        try:
            _C._init()
            while _queued_calls:
                call, origin = _queued_calls.pop(0)
                try:
                    call()
                except Exception as e:  # surface where the call was queued from
                    raise RuntimeError(
                        f"my_asic call failed during lazy initialization: {e}\n"
                        f"It was queued at:\n{origin}"
                    ) from e
        finally:
            _initializing = False


def _lazy_call(call: Callable[[], None]) -> None:
    """Runs ``call`` now if the runtime is up, else at initialisation."""
    if _C._is_initialized():
        call()
    else:
        with _lock:
            _queued_calls.append((call, "".join(traceback.format_stack())))
