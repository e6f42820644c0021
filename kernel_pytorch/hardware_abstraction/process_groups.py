"""Launching a ``torch.distributed`` process group from the HAL's mesh descriptions.

``device_mesh_description`` (placement.py) says which devices a job spans,
one :class:`MeshDescription` per torch device type. Every process of the job
(started by torchrun or any launcher setting RANK / WORLD_SIZE) calls
:func:`init_process_group_from_mesh` with the same descriptions; ranks are
laid out mesh by mesh in the order given (mesh 0's devices first)::

    meshes = [m for m in adapter.device_mesh_description() if m.device_type == "cuda"]
    group = init_process_group_from_mesh(meshes)        # nccl, one GPU per rank
    model = DDP(model.to(group.device))

One device type: the group uses that type's backend (nccl, myccl, ...) with
gloo beside it for CPU tensors, and ``group.device_mesh`` is a DeviceMesh
over all ranks. Several types (a heterogeneous job, e.g. CPU ranks and
my_asic ranks): every rank must take part in the same collectives, so the
group needs one backend that moves tensors of all those types
(:data:`HETEROGENEOUS_BACKENDS`); there is no DeviceMesh then (a DeviceMesh
has one device type), but DDP and plain collectives work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Dict, FrozenSet, List, Optional, Sequence, Union

import torch

from .placement import MeshDescription

__all__ = [
    "HETEROGENEOUS_BACKENDS", "MeshProcessGroup", "RankPlacement", "rank_placements",
    "process_group_backend_string", "init_process_group_from_mesh",
]

#: Device types mixed in one job -> a backend that moves tensors of every one
#: of them through the same transport. myccl takes CPU tensors too; gloo
#: takes CPU and CUDA tensors.
HETEROGENEOUS_BACKENDS: Dict[FrozenSet[str], str] = {
    frozenset({"cpu", "my_asic"}): "myccl",
    frozenset({"cpu", "cuda"}): "gloo",
}


@dataclass(frozen=True)
class RankPlacement:
    """Global rank ``rank`` runs on ``device``, described by ``mesh``."""

    rank: int
    device: torch.device
    mesh: MeshDescription


@dataclass(frozen=True)
class MeshProcessGroup:
    """What :func:`init_process_group_from_mesh` set up for this process."""

    rank: int
    world_size: int
    device: torch.device
    backend: str
    """The backend string passed to ``init_process_group`` (e.g. ``"cuda:nccl,cpu:gloo"``)."""
    device_mesh: Optional[object]
    """A ``DeviceMesh`` over all ranks for a single device type; None for a heterogeneous job."""


def _as_list(meshes: Union[MeshDescription, Sequence[MeshDescription]]) -> List[MeshDescription]:
    meshes = [meshes] if isinstance(meshes, MeshDescription) else list(meshes)
    if not meshes:
        raise ValueError("no mesh descriptions: pass device_mesh_description(...) output with at least one mesh")
    return meshes


def rank_placements(meshes: Union[MeshDescription, Sequence[MeshDescription]]) -> List[RankPlacement]:
    """Every global rank's device: mesh by mesh, devices in mesh order."""
    placements = []
    for mesh in _as_list(meshes):
        for spec in mesh.devices:
            placements.append(RankPlacement(len(placements), spec.device, mesh))
    return placements


def process_group_backend_string(meshes: Union[MeshDescription, Sequence[MeshDescription]]) -> str:
    """The ``init_process_group`` backend string for a job over ``meshes``.

    Raises ValueError naming the device types when no backend is known for
    them (a type without a registered backend, or a mix no backend covers).
    """
    meshes = _as_list(meshes)
    types = [m.device_type for m in meshes]
    if len(set(types)) != len(types):
        raise ValueError(f"two meshes of one device type in {types}; device_mesh_description gives one per type")
    if len(types) == 1:
        mesh = meshes[0]
        if mesh.process_group_backend is None:
            raise ValueError(
                f"no torch.distributed backend is known for device type '{mesh.device_type}'; "
                f"import the extension that registers one, or give its HAL adapter a process_group_backend")
        if mesh.device_type == "cpu" or mesh.process_group_backend == "gloo":
            return mesh.process_group_backend
        # gloo beside it for CPU tensors (object collectives, metrics).
        return f"{mesh.device_type}:{mesh.process_group_backend},cpu:gloo"
    backend = HETEROGENEOUS_BACKENDS.get(frozenset(types))
    if backend is None:
        raise ValueError(
            f"no torch.distributed backend moves tensors of all of {sorted(types)} in one group; "
            f"run one job per device type, or use one of {[sorted(k) for k in HETEROGENEOUS_BACKENDS]}")
    return ",".join(f"{t}:{backend}" for t in types)


def init_process_group_from_mesh(
    meshes: Union[MeshDescription, Sequence[MeshDescription]],
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
    init_method: Optional[str] = None,
    timeout: timedelta = timedelta(minutes=10),
) -> MeshProcessGroup:
    """Joins the process group the descriptions call for and selects this rank's device.

    Args:
        meshes: ``device_mesh_description(...)`` output (or one description);
            the same on every rank.
        rank, world_size: default to the RANK / WORLD_SIZE variables torchrun sets.
            ``world_size`` must equal the number of devices in ``meshes``.
        init_method: as for ``init_process_group`` (default ``env://``).
        timeout: collective timeout of the group.
    """
    import torch.distributed as dist

    placements = rank_placements(meshes)
    meshes = _as_list(meshes)
    rank = int(os.environ["RANK"]) if rank is None else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None else world_size
    if world_size != len(placements):
        raise ValueError(
            f"the meshes hold {len(placements)} devices ({', '.join(str(p.device) for p in placements)}) but "
            f"world_size is {world_size}; launch one process per device (torchrun --nproc-per-node "
            f"{len(placements)})")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside the world of {world_size} ranks")
    device = placements[rank].device
    if device.type != "cpu":
        torch.get_device_module(device.type).set_device(device)
    backend = process_group_backend_string(meshes)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size, timeout=timeout)
    device_mesh = None
    if len(meshes) == 1:
        from torch.distributed.device_mesh import DeviceMesh

        # DeviceMesh(...) rather than init_device_mesh, which refuses device
        # types that are not all letters (my_asic) in torch 2.13.
        device_mesh = DeviceMesh(
            meshes[0].device_type, torch.arange(world_size).reshape(meshes[0].mesh_shape),
            mesh_dim_names=meshes[0].mesh_dim_names)
    return MeshProcessGroup(rank, world_size, device, backend, device_mesh)
