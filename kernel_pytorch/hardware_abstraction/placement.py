"""Spreading work over several devices, possibly of different vendors.

Pure functions of the ``DeviceSpec`` values they are given (no hardware queries,
deterministic for equal inputs): :func:`place_workload` splits data-parallel workers in
proportion to each device's capability score (its dense peak for the dtype, TFLOPS),
:func:`place_model_stages` places pipeline stages contiguously by score and free memory,
and :func:`device_mesh_description` gives one ``init_device_mesh`` description per torch
device type (a process group runs one communication backend). Devices torch cannot
address (OpenCL) and devices without the requested dtype are left out of all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch

from .hal_core import DeviceSpec, precision_key
from .registry import process_group_backends

__all__ = [
    "WorkerAssignment", "StageAssignment", "MeshDescription", "process_group_backend_for",
    "capability_score", "place_workload", "place_model_stages", "device_mesh_description",
]

def process_group_backend_for(device_type: str) -> Optional[str]:
    """The ``torch.distributed`` backend for ``device_type`` (the HAL adapters' ``process_group_backend``,
    else what an extension's ``register_backend(..., devices=[...])`` registered); None when unknown."""
    known = process_group_backends()
    if device_type in known:
        return known[device_type]
    import torch.distributed as dist

    if dist.is_available():
        return dist.Backend.default_device_backend_map.get(device_type)
    return None


@dataclass(frozen=True)
class WorkerAssignment:
    """Worker ``worker_rank`` runs on ``device``."""

    worker_rank: int
    device: DeviceSpec

    def __str__(self) -> str:
        return f"worker {self.worker_rank} -> {self.device.device} ({self.device.name})"


@dataclass(frozen=True)
class StageAssignment:
    """Pipeline stage ``stage_index`` (needing ``memory_gb`` GB) runs on ``device``."""

    stage_index: int
    memory_gb: float
    device: DeviceSpec

    def __str__(self) -> str:
        return f"stage {self.stage_index} ({self.memory_gb:g} GB) -> {self.device.device} ({self.device.name})"


@dataclass(frozen=True)
class MeshDescription:
    """Arguments for ``init_device_mesh`` covering every device of one torch type.

    The mesh is 1-D with one rank per device (one process per device, the
    layout torchrun uses); ``world_size`` is the number of processes to launch.
    """

    device_type: str
    mesh_shape: Tuple[int, ...]
    mesh_dim_names: Tuple[str, ...]
    devices: Tuple[DeviceSpec, ...]
    process_group_backend: Optional[str]
    """``torch.distributed`` backend for this device type; None when unknown."""

    def __str__(self) -> str:
        backend = self.process_group_backend or "backend unknown"
        devices = ", ".join(str(spec.device) for spec in self.devices)
        return f"{self.device_type} mesh {self.mesh_shape} {self.mesh_dim_names} over {devices} ({backend})"

    @property
    def world_size(self) -> int:
        return math.prod(self.mesh_shape)

    def init_kwargs(self) -> Dict[str, object]:
        """``init_device_mesh(**desc.init_kwargs())`` builds this mesh."""
        return {
            "device_type": self.device_type,
            "mesh_shape": self.mesh_shape,
            "mesh_dim_names": self.mesh_dim_names,
        }


def capability_score(spec: DeviceSpec, dtype: Union[str, torch.dtype] = "bf16") -> float:
    """Dense peak for ``dtype`` in TFLOPS (TOPS for int8); 0.0 when the device cannot be used for it."""
    if not spec.torch_usable:
        return 0.0
    peak = spec.capabilities.peak_tflops_for(dtype)
    return float(peak) if peak is not None and peak > 0 else 0.0


def _scored_devices(devices: Sequence[DeviceSpec], dtype: Union[str, torch.dtype], caller: str) -> List[Tuple[DeviceSpec, float]]:
    key = precision_key(dtype)
    scored = [(spec, capability_score(spec, key)) for spec in devices]
    usable = [(spec, score) for spec, score in scored if score > 0]
    if not usable:
        raise ValueError(
            f"{caller}: none of the {len(devices)} device(s) is usable by torch with a known {key} peak; "
            f"pass devices from HardwareAbstractionLayer().devices or choose another dtype"
        )
    return usable


def _apportion(scores: Sequence[float], capacities: Sequence[int], total: int) -> List[int]:
    """Largest-remainder apportionment of ``total`` by ``scores``, never exceeding ``capacities``.

    Devices that hit their capacity are fixed and the rest is re-apportioned
    among the others, so the result stays proportional where it can be.
    """
    counts = [0] * len(scores)
    open_slots = [i for i in range(len(scores)) if capacities[i] > 0]
    remaining = total
    while remaining > 0 and open_slots:
        weight = sum(scores[i] for i in open_slots)
        quotas = {i: remaining * scores[i] / weight for i in open_slots}
        overfull = [i for i in open_slots if quotas[i] >= capacities[i] - counts[i]]
        if overfull:
            for i in overfull:
                remaining -= capacities[i] - counts[i]
                counts[i] = capacities[i]
            open_slots = [i for i in open_slots if i not in overfull]
            continue
        floors = {i: int(quotas[i]) for i in open_slots}
        for i in open_slots:
            counts[i] += floors[i]
        leftover = remaining - sum(floors.values())
        # Largest remainder first; ties to the higher score, then the earlier device.
        by_remainder = sorted(open_slots, key=lambda i: (-(quotas[i] - floors[i]), -scores[i], i))
        for i in by_remainder[:leftover]:
            counts[i] += 1
        remaining = 0
    return counts


def place_workload(
    devices: Sequence[DeviceSpec],
    num_workers: int,
    dtype: Union[str, torch.dtype] = "bf16",
    memory_per_worker_gb: Optional[float] = None,
) -> List[WorkerAssignment]:
    """Assign ``num_workers`` data-parallel workers to devices in proportion to capability.

    Args:
        devices: candidates, e.g. ``HardwareAbstractionLayer().devices``.
        num_workers: workers to place (> 0).
        dtype: precision whose peak (TFLOPS) is the capability score.
        memory_per_worker_gb: free memory one worker needs, GB (1e9 bytes);
            a device takes at most ``floor(free / memory_per_worker_gb)``
            workers. None places without a memory cap.

    Returns:
        One :class:`WorkerAssignment` per worker, ranks ``0..num_workers-1``;
        a device's workers have consecutive ranks and devices appear in
        descending score order (ties in the order given).

    Raises:
        ValueError: bad arguments, no usable device, or the devices' free
            memory holds fewer than ``num_workers`` workers (the message gives
            the capacity).
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers <= 0:
        raise ValueError(f"num_workers must be a positive integer, got {num_workers!r}")
    if memory_per_worker_gb is not None and not memory_per_worker_gb > 0:
        raise ValueError(f"memory_per_worker_gb must be > 0 GB or None, got {memory_per_worker_gb!r}")
    scored = _scored_devices(devices, dtype, "place_workload")
    scored.sort(key=lambda item: -item[1])  # stable: equal scores keep the given order
    if memory_per_worker_gb is None:
        capacities = [num_workers] * len(scored)
    else:
        capacities = [max(0, int(spec.capabilities.memory_free_gb // memory_per_worker_gb)) for spec, _ in scored]
    if sum(capacities) < num_workers:
        raise ValueError(
            f"place_workload: {num_workers} workers of {memory_per_worker_gb:g} GB do not fit; the free memory "
            f"of the usable devices holds {sum(capacities)} "
            f"({', '.join(f'{spec.device}: {cap}' for (spec, _), cap in zip(scored, capacities))}); "
            f"use fewer workers or less memory per worker"
        )
    counts = _apportion([score for _, score in scored], capacities, num_workers)
    assignments: List[WorkerAssignment] = []
    for (spec, _), count in zip(scored, counts):
        for _ in range(count):
            assignments.append(WorkerAssignment(len(assignments), spec))
    return assignments


def place_model_stages(
    devices: Sequence[DeviceSpec],
    stage_memory_gb: Sequence[float],
    dtype: Union[str, torch.dtype] = "bf16",
) -> List[StageAssignment]:
    """Place pipeline stages, in order, on devices so that each stage fits in free memory.

    Args:
        devices: candidates, e.g. ``HardwareAbstractionLayer().devices``.
        stage_memory_gb: memory each stage needs, GB (1e9 bytes), in pipeline
            order.
        dtype: precision whose peak (TFLOPS) sets each device's share.

    Returns:
        One :class:`StageAssignment` per stage, in stage order. Devices are
        used in descending score order, each taking a contiguous run of stages.

    Raises:
        ValueError: a stage larger than every device's free memory, or stages
            that do not fit contiguously in the devices' free memory; the
            message names the stage and the free memory available.
    """
    stages = [float(gb) for gb in stage_memory_gb]
    if not stages:
        raise ValueError("stage_memory_gb is empty; pass the memory (GB) of each pipeline stage")
    if any(not gb >= 0 for gb in stages):
        raise ValueError(f"stage_memory_gb entries must be >= 0 GB, got {list(stage_memory_gb)}")
    scored = _scored_devices(devices, dtype, "place_model_stages")
    scored.sort(key=lambda item: -item[1])
    largest_free = max(spec.capabilities.memory_free_gb for spec, _ in scored)
    for index, gb in enumerate(stages):
        if gb > largest_free:
            raise ValueError(
                f"stage {index} needs {gb:g} GB but the most free memory on any usable device is "
                f"{largest_free:.2f} GB; split the stage further"
            )

    total_stage_gb = sum(stages)
    total_score = sum(score for _, score in scored)
    targets = [total_stage_gb * score / total_score for _, score in scored]
    free = [spec.capabilities.memory_free_gb for spec, _ in scored]
    used = [0.0] * len(scored)

    placed: List[StageAssignment] = []
    current = 0
    for index, gb in enumerate(stages):
        while True:
            is_last_device = current == len(scored) - 1
            fits = used[current] + gb <= free[current]
            # A stage belongs to the current device while its midpoint falls
            # within that device's share; the last device takes what is left.
            within_share = used[current] + gb / 2 <= targets[current] or used[current] == 0.0
            if fits and (within_share or is_last_device):
                break
            if is_last_device:
                raise ValueError(
                    f"stage {index} ({gb:g} GB) does not fit: stages 0..{index - 1} already fill the free memory "
                    f"of the devices in pipeline order and {scored[current][0].device} has "
                    f"{free[current] - used[current]:.2f} GB left; contiguous placement needs more free memory "
                    f"or smaller stages"
                )
            current += 1
        used[current] += gb
        placed.append(StageAssignment(index, gb, scored[current][0]))
    return placed


def device_mesh_description(
    devices: Sequence[DeviceSpec],
    mesh_dim_names: Tuple[str, ...] = ("data_parallel",),
) -> List[MeshDescription]:
    """One 1-D :class:`MeshDescription` per torch device type among ``devices``.

    Devices torch cannot address (OpenCL) are left out; mesh order follows the
    first appearance of each type in ``devices``, and devices within a mesh
    are ordered by index.
    """
    if len(mesh_dim_names) != 1:
        raise ValueError(f"device_mesh_description builds 1-D meshes; pass one dimension name, got {mesh_dim_names!r}")
    by_type: Dict[str, List[DeviceSpec]] = {}
    for spec in devices:
        if spec.torch_usable:
            by_type.setdefault(spec.device.type, []).append(spec)
    meshes = []
    for device_type, specs in by_type.items():
        specs = sorted(specs, key=lambda spec: spec.index)
        meshes.append(
            MeshDescription(
                device_type=device_type,
                mesh_shape=(len(specs),),
                mesh_dim_names=tuple(mesh_dim_names),
                devices=tuple(specs),
                process_group_backend=process_group_backend_for(device_type),
            )
        )
    return meshes
