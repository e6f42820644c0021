"""myccl: the ``torch.distributed`` backend for my_asic tensors.

``import kernel_pytorch`` registers it, so process groups are written as for
any device::

    dist.init_process_group("cpu:gloo,my_asic:myccl")           # CPU and my_asic tensors
    dist.init_process_group(device_id=torch.device("my_asic", local_rank))  # myccl picked for my_asic

The collectives are implemented in C++ (csrc/distributed, a ``c10d::Backend``);
their transport is PyTorch's own gloo, working on host aliases of device
memory when the runtime reports it host addressable and on staging copies
otherwise. docs/distributed.md describes the transport interface a chip team
replaces with its own collective library.
"""

from __future__ import annotations

import atexit
import logging
from datetime import timedelta

import torch

logger = logging.getLogger(__name__)

BACKEND_NAME = "myccl"
DEVICE_TYPE = "my_asic"

__all__ = ["BACKEND_NAME", "register_myccl", "is_myccl_registered", "set_default_backend"]


def _create_myccl(dist_options, backend_options=None):
    """``register_backend`` creator (extended API): one myccl backend per process group.

    Builds a gloo backend on a store prefix of its own (so it never meets
    other backends' keys) and wraps it as myccl's transport.
    """
    from torch.distributed import PrefixStore, ProcessGroupGloo

    from kernel_pytorch import _C

    timeout = dist_options.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    rank, size = dist_options.group_rank, dist_options.group_size
    store = PrefixStore(f"{BACKEND_NAME}/gloo/", dist_options.store)
    gloo = ProcessGroupGloo(store, rank, size, timeout)
    _register_exit_hook()
    return _C._distributed._create_myccl_over_gloo(gloo, rank, size, timeout)


# How long the exit hook waits for operations that are still completing.
_EXIT_WAIT_S = 10.0
_exit_hook_registered = False


def _wait_for_completions_at_exit() -> None:
    """Lets myccl operations that are still completing finish before finalisation.

    A transport thread that completes one may release its output tensors, which
    takes the GIL; during finalisation CPython ends such a thread mid-unwind and
    the process aborts (csrc/distributed/myccl_work.h).
    """
    from kernel_pytorch import _C

    if not _C._distributed._wait_for_background_completions(_EXIT_WAIT_S):
        logger.warning("myccl: operations were still completing %.0f s into interpreter exit; "
                       "the exit may not be clean", _EXIT_WAIT_S)


def _register_exit_hook() -> None:
    global _exit_hook_registered
    if not _exit_hook_registered:
        atexit.register(_wait_for_completions_at_exit)
        _exit_hook_registered = True


def is_myccl_registered() -> bool:
    """Whether ``torch.distributed`` knows the ``myccl`` backend."""
    import torch.distributed as dist

    return dist.is_available() and hasattr(dist.Backend, BACKEND_NAME.upper())


def register_myccl() -> bool:
    """Registers ``myccl`` as the ``torch.distributed`` backend of my_asic (idempotent).

    Returns False (and registers nothing) when this torch build has no
    ``torch.distributed`` or no gloo.
    """
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        return False
    if is_myccl_registered():
        return True
    dist.Backend.register_backend(BACKEND_NAME, _create_myccl, extended_api=True, devices=[DEVICE_TYPE])
    return True


def set_default_backend(group=None) -> bool:
    """Gives a process group built from a backend string that names myccl
    (``"cpu:gloo,my_asic:myccl"``) the default backend ``init_process_group`` /
    ``new_group`` meant to give it: the custom one.  Returns whether it changed anything.

    torch.distributed (2.13) looks the first plugin up by its upper-case name
    (``"MYCCL"``) among the backend string's lower-case names (``"myccl"``), finds
    none and leaves the group's default backend undefined: ``group.name()`` reads
    ``"undefined"`` and ``destroy_process_group()`` warns "No backend of type 0 found
    for Process Group with name undefined" on every rank.  Groups whose default is
    set, or that have no myccl backend, are left alone.

    Args:
        group: a process group; None for the default (world) group.
    """
    import torch.distributed as dist

    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if pg is dist.GroupMember.NON_GROUP_MEMBER or pg.name() != "undefined":
        return False
    if BACKEND_NAME not in [pair.split(":")[-1] for pair in str(dist.get_backend(pg)).split(",")]:
        return False
    pg._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
    return True
