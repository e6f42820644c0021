"""Rank programs for failures (run by ranks.py): each records the error a
rank saw and how long it took, instead of raising."""

import os
import time

import torch
import torch.distributed as dist

import kernel_pytorch  # noqa: F401

from collective_programs import device, init

GROUP_TIMEOUT_S = 5


def _attempt(fn):
    start = time.monotonic()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- the error is the result
        return {"error_type": type(e).__name__, "error": str(e).split("\nException raised from")[0][:2000],
                "elapsed_s": time.monotonic() - start}
    return {"error": None, "elapsed_s": time.monotonic() - start}


def peer_dies(rank, world):
    """Rank 1 exits after one collective; rank 0's next all_reduce must fail, not hang."""
    init(timeout_s=GROUP_TIMEOUT_S)
    t = torch.ones(4, device=device())
    dist.all_reduce(t)
    if rank == 1:
        os._exit(3)
    time.sleep(0.5)
    return _attempt(lambda: dist.all_reduce(t))


def peer_never_arrives(rank, world):
    """Only rank 0 of 2 is started: joining the group must time out."""
    return _attempt(lambda: init(timeout_s=GROUP_TIMEOUT_S))


def bad_arguments(rank, world):
    """Local argument errors are raised before any communication, and the group stays usable."""
    init("myccl", timeout_s=GROUP_TIMEOUT_S)
    dev = device()
    out = {}
    out["cpu_tensor_in_my_asic_group"] = _attempt(lambda: dist.all_reduce(torch.ones(2)))
    other = torch.device("my_asic", 1 - dev.index)
    out["tensors_on_two_devices"] = _attempt(
        lambda: dist.all_gather_into_tensor(torch.empty(2 * world, device=dev), torch.ones(2, device=other)))
    out["wrong_output_size"] = _attempt(
        lambda: dist.all_gather_into_tensor(torch.empty(2 * world + 1, device=dev), torch.ones(2, device=dev)))
    out["wrong_list_length"] = _attempt(
        lambda: dist.all_gather([torch.empty(2, device=dev)] * (world + 1), torch.ones(2, device=dev)))
    out["mismatched_list_sizes"] = _attempt(
        lambda: dist.all_gather([torch.empty(3, device=dev) for _ in range(world)], torch.ones(2, device=dev)))
    out["non_contiguous"] = _attempt(lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()))
    out["bad_root"] = _attempt(lambda: dist.broadcast(torch.ones(2, device=dev), src=world + 3))
    out["unsupported_op"] = _attempt(
        lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32, device=dev), op=dist.ReduceOp.BAND))
    t = torch.full((2,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    out["usable_afterwards"] = t.cpu().tolist()
    dist.destroy_process_group()
    return out


def sizes_differ_across_ranks(rank, world):
    """Rank r all_reduces r + 2 elements: the ranks disagree on the size."""
    init(timeout_s=GROUP_TIMEOUT_S)
    t = torch.ones(rank + 2, device=device())
    return _attempt(lambda: dist.all_reduce(t))
