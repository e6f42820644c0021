"""Clean interpreter exit after a backward pass on my_asic.

The autograd engine runs my_asic backward work on its own device threads. The
last backward's state can still be released on such a thread after
``backward()`` returned, and that release takes the GIL: if Python is already
finalising, the thread is killed mid-unwind and the process aborts
("terminate called without an active exception", exit code 134). An
``atexit`` hook runs before finalisation, while other threads may still take
the GIL: it waits until every device thread has let go (see
csrc/aten/autograd_exit.cpp for the mechanism and the upstream references).
"""

import atexit
import logging
import os

from kernel_pytorch import _C

logger = logging.getLogger(__name__)

_registered = False


def _autograd_device_threads_started() -> bool:
    """Whether the autograd engine's device threads (``pt_autograd_N``) exist.

    Read from /proc on Linux; elsewhere assumed, which costs one tiny backward
    per device at exit.
    """
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                if f.read().startswith("pt_autograd_"):
                    return True
        except OSError:
            continue  # the thread ended meanwhile
    return False


def _drain_autograd_device_threads() -> None:
    if not _C._is_initialized() or _C._in_bad_fork() or not _autograd_device_threads_started():
        return
    try:
        _C._drain_autograd_device_threads()
    except Exception as e:  # exit must go on; say why it may not be clean
        logger.warning("my_asic: could not quiesce the autograd device threads at exit: %s", e)


def register_exit_hook() -> None:
    """Registers the atexit hook once per process."""
    global _registered
    if not _registered:
        atexit.register(_drain_autograd_device_threads)
        _registered = True
