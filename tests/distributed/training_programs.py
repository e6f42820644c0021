"""Rank programs that train with DDP and FSDP2, and use DeviceMesh / DTensor
(run by ranks.py). training_reference() is the single-process baseline the
tests compare against."""

import os

import torch
import torch.distributed as dist
from torch import nn

import kernel_pytorch  # noqa: F401

from collective_programs import device, init

GLOBAL_BATCH = 12  # divisible by 2, 3 and 4 ranks
STEPS = 3
LR = 0.1


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def make_batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(GLOBAL_BATCH, 6, generator=g), torch.randn(GLOBAL_BATCH, 3, generator=g))
            for _ in range(STEPS)]


def _train(model, batches, dev, rank, world):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    per_rank = GLOBAL_BATCH // world
    for x, y in batches:
        x = x[rank * per_rank:(rank + 1) * per_rank].to(dev)
        y = y[rank * per_rank:(rank + 1) * per_rank].to(dev)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def my_asic_mesh(world, names=None):
    """DeviceMesh("my_asic", ...) over every rank. (init_device_mesh refuses
    device types that are not all letters, such as my_asic: torch 2.13
    device_mesh.py checks device_type.isalpha().)"""
    from torch.distributed.device_mesh import DeviceMesh

    return DeviceMesh("my_asic", list(range(world)), mesh_dim_names=names)


def training_reference(dev="cpu"):
    """Final parameters of single-process training on the whole global batch."""
    model = make_model().to(dev)
    _train(model, make_batches(), dev, 0, 1)
    return {name: p.detach().cpu().flatten().tolist() for name, p in model.named_parameters()}


def ddp_training(rank, world):
    """DDP over myccl, each rank on its own my_asic device, 1/world of the batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    init()
    dev = device()
    torch.my_asic.set_device(dev)
    model = DDP(make_model().to(dev))
    _train(model, make_batches(), dev, rank, world)
    out = {name.removeprefix("module."): p.detach().cpu().flatten().tolist()
           for name, p in model.named_parameters()}
    dist.destroy_process_group()
    return out


def fsdp2_training(rank, world):
    """fully_shard on a my_asic DeviceMesh; full parameters gathered at the end."""
    from torch.distributed.fsdp import fully_shard

    init()
    dev = device()
    torch.my_asic.set_device(dev)
    mesh = my_asic_mesh(world)
    model = make_model().to(dev)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    _train(model, make_batches(), dev, rank, world)
    out = {}
    for name, p in model.named_parameters():
        out[name] = p.full_tensor().detach().cpu().flatten().tolist()
        out[name + ".local_device"] = str(p.to_local().device)
    dist.destroy_process_group()
    return out


def dtensor_basics(rank, world):
    """distribute_tensor, redistribute and a sharded matmul on a my_asic mesh."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    init()
    dev = device()
    torch.my_asic.set_device(dev)
    mesh = my_asic_mesh(world, ("dp",))
    torch.manual_seed(3)
    a = torch.randn(4 * world, 5)
    b = torch.randn(5, 2 * world)
    da = distribute_tensor(a.to(dev), mesh, [Shard(0)])
    db = distribute_tensor(b.to(dev), mesh, [Replicate()])
    rows = da @ db                        # Shard(0) x Replicate -> Shard(0)
    cols = distribute_tensor(a.to(dev), mesh, [Replicate()]) @ distribute_tensor(b.to(dev), mesh, [Shard(1)])
    out = {
        "mesh_device_type": mesh.device_type,
        "local_shard_shape": list(da.to_local().shape),
        "local_shard_device": str(da.to_local().device),
        "local_shard": da.to_local().cpu().tolist(),
        "expected_shard": a[rank * 4:(rank + 1) * 4].tolist(),
        "redistributed_to_replicate": da.redistribute(mesh, [Replicate()]).to_local().cpu().tolist(),
        "full": a.tolist(),
        "rowwise_placement": str(rows.placements[0]),
        "rowwise_matmul": rows.full_tensor().cpu().tolist(),
        "colwise_matmul": cols.full_tensor().cpu().tolist(),
        "expected_matmul": (a @ b).tolist(),
    }
    dist.destroy_process_group()
    return out


def _hal_ddp(group, rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(make_model().to(group.device))
    _train(model, make_batches(), group.device, rank, world)
    return {name.removeprefix("module."): p.detach().cpu().flatten().tolist()
            for name, p in model.named_parameters()}


def hal_mesh_ddp(rank, world):
    """The HAL's my_asic mesh description launched by its helper; DDP on it."""
    from kernel_pytorch.distributed_scale.hardware_adapter import HardwareAdapter

    adapter = HardwareAdapter(enable_hal=True)
    group = adapter.init_process_group(["my_asic"], init_method=os.environ["KP_INIT_METHOD"])
    out = _hal_ddp(group, rank, world)
    out["_device"] = str(group.device)
    out["_backend"] = group.backend
    out["_mesh"] = [group.device_mesh.device_type, list(group.device_mesh.mesh.shape)]
    dist.destroy_process_group()
    return out


def heterogeneous_ddp(rank, world):
    """One job over the HAL's my_asic devices and the CPU: DDP across both kinds of rank."""
    from kernel_pytorch.distributed_scale.hardware_adapter import HardwareAdapter

    adapter = HardwareAdapter(enable_hal=True)
    group = adapter.init_process_group(["my_asic", "cpu"], init_method=os.environ["KP_INIT_METHOD"])
    out = _hal_ddp(group, rank, world)
    out["_device"] = str(group.device)
    out["_backend"] = group.backend
    out["_mesh"] = group.device_mesh
    dist.destroy_process_group()
    return out
