"""Rank programs for process groups as users write them (run by ranks.py)."""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

import kernel_pytorch  # noqa: F401

from collective_programs import device, init


def default_backend_from_device_id(rank, world):
    """init_process_group(device_id=my_asic:r) with no backend named: myccl, as nccl for cuda."""
    dev = torch.device("my_asic", rank)
    dist.init_process_group(
        init_method=os.environ["KP_INIT_METHOD"], rank=rank, world_size=world, device_id=dev,
        timeout=timedelta(seconds=30))
    t = torch.ones(2, device=dev) * (rank + 1)
    dist.all_reduce(t)
    out = {
        "backend": dist.get_backend(),
        "my_asic_sum": t.cpu().tolist(),
        "current_device": torch.my_asic.current_device(),
    }
    dist.destroy_process_group()
    return out


def default_backends_without_arguments(rank, world):
    """init_process_group() with neither backend nor device: torch picks the backend of
    the current accelerator (my_asic -> myccl), as it picks nccl for CUDA."""
    dist.init_process_group(
        init_method=os.environ["KP_INIT_METHOD"], rank=rank, world_size=world, timeout=timedelta(seconds=30))
    t = torch.ones(2, device=device()) * (rank + 1)
    dist.all_reduce(t)
    out = {"my_asic_sum": t.cpu().tolist(),
           "my_asic_backend": dist.group.WORLD._get_backend(t.device).__class__.__name__}
    dist.destroy_process_group()
    return out


def new_group_of_even_ranks(rank, world):
    """new_group over a subset, plus a split of the world group."""
    init()
    dev = device()
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    t = torch.full((2,), float(rank + 1), device=dev)
    if rank % 2 == 0:
        dist.all_reduce(t, group=evens)
    world_t = torch.full((2,), float(rank + 1), device=dev)
    dist.all_reduce(world_t)
    out = {"evens_sum": t.cpu().tolist(), "world_sum": world_t.cpu().tolist(),
           "evens_backend": dist.get_backend(evens) if rank % 2 == 0 else None}
    dist.destroy_process_group()
    return out


def torchrun_entry(rank, world):
    """What a torchrun script does: env:// rendezvous, one device per LOCAL_RANK."""
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.my_asic.set_device(local_rank)
    dist.init_process_group("myccl", timeout=timedelta(seconds=30))
    t = torch.full((2,), float(dist.get_rank() + 1), device="my_asic")
    dist.all_reduce(t)
    out = {"device": str(t.device), "sum": t.cpu().tolist(), "rank": dist.get_rank(),
           "world": dist.get_world_size(), "backend": dist.get_backend()}
    dist.destroy_process_group()
    return out
