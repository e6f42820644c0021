"""Specification of the process-group launch helpers (hardware_abstraction/process_groups.py):
rank layout and backend strings from mesh descriptions. Launching real groups
is tested in tests/distributed/test_hal_mesh.py."""

import pytest
import torch

from hal_test_support import fake_spec
from kernel_pytorch.hardware_abstraction.placement import device_mesh_description
from kernel_pytorch.hardware_abstraction.process_groups import (
    init_process_group_from_mesh,
    process_group_backend_string,
    rank_placements,
)

# A custom-ASIC device is described as my_asic with myccl only where my_asic is
# registered; beside another accelerator that takes MY_ASIC_ENABLE=1.
needs_my_asic = pytest.mark.skipif(
    not hasattr(torch, "my_asic"),
    reason="my_asic is not registered in this process (beside another accelerator it needs MY_ASIC_ENABLE=1)",
)


@needs_my_asic
def test_my_asic_mesh_uses_myccl_with_gloo_for_cpu_tensors():
    (mesh,) = device_mesh_description([fake_spec("custom_asic", 0), fake_spec("custom_asic", 1)])
    assert mesh.process_group_backend == "myccl"
    assert process_group_backend_string(mesh) == "my_asic:myccl,cpu:gloo"


def test_cuda_mesh_uses_nccl_and_cpu_mesh_gloo():
    (cuda,) = device_mesh_description([fake_spec("nvidia", 0), fake_spec("nvidia", 1)])
    (cpu,) = device_mesh_description([fake_spec("cpu")])
    assert process_group_backend_string(cuda) == "cuda:nccl,cpu:gloo"
    assert process_group_backend_string(cpu) == "gloo"


@needs_my_asic
def test_cpu_and_my_asic_job_uses_one_backend_for_both():
    meshes = device_mesh_description([fake_spec("custom_asic", 0), fake_spec("cpu")])
    assert process_group_backend_string(meshes) == "my_asic:myccl,cpu:myccl"


@needs_my_asic
def test_a_mix_no_backend_covers_is_rejected_with_the_types():
    meshes = device_mesh_description([fake_spec("custom_asic", 0), fake_spec("nvidia", 0)])
    with pytest.raises(ValueError, match=r"\['cuda', 'my_asic'\]"):
        process_group_backend_string(meshes)


@needs_my_asic
def test_ranks_are_laid_out_mesh_by_mesh():
    meshes = device_mesh_description([fake_spec("custom_asic", 1), fake_spec("cpu"), fake_spec("custom_asic", 0)])
    assert [(p.rank, str(p.device)) for p in rank_placements(meshes)] == [
        (0, "my_asic:0"), (1, "my_asic:1"), (2, "cpu")]


def test_world_size_must_match_the_devices_described():
    meshes = device_mesh_description([fake_spec("custom_asic", 0), fake_spec("custom_asic", 1)])
    with pytest.raises(ValueError, match="2 devices .* world_size is 3"):
        init_process_group_from_mesh(meshes, rank=0, world_size=3)
