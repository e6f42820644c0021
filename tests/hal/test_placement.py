"""Specification of place_workload, place_model_stages and device_mesh_description.

Accelerator DeviceSpecs are hand-written fakes of hardware this machine lacks;
the mesh test builds a real single-process gloo mesh on the CPU.
"""

import socket

import pytest
import torch
import torch.distributed as dist

from hal_test_support import fake_spec
from kernel_pytorch.hardware_abstraction.placement import (
    device_mesh_description,
    place_model_stages,
    place_workload,
)


def workers_per_device(assignments):
    counts = {}
    for assignment in assignments:
        counts[str(assignment.device.device)] = counts.get(str(assignment.device.device), 0) + 1
    return counts


# ---------------------------------------------------------------- place_workload


def test_workers_split_in_proportion_to_peak_tflops():
    fast = fake_spec("nvidia", 0, bf16=300.0)
    slow = fake_spec("nvidia", 1, bf16=100.0)
    assert workers_per_device(place_workload([slow, fast], 8)) == {"cuda:0": 6, "cuda:1": 2}


def test_largest_remainder_rounding_gives_the_odd_worker_to_the_largest_fraction():
    # Quotas 7 * (5/9, 3/9, 1/9) = 3.89, 2.33, 0.78 -> floors 3, 2, 0; one left over goes to 0.89.
    a, b, c = fake_spec("nvidia", 0, bf16=500.0), fake_spec("nvidia", 1, bf16=300.0), fake_spec("nvidia", 2, bf16=100.0)
    assert workers_per_device(place_workload([a, b, c], 7)) == {"cuda:0": 4, "cuda:1": 2, "cuda:2": 1}


def test_ranks_are_consecutive_per_device_in_descending_score_order():
    slow, fast = fake_spec("nvidia", 0, bf16=100.0), fake_spec("nvidia", 1, bf16=300.0)
    assignments = place_workload([slow, fast], 4)
    assert [a.worker_rank for a in assignments] == [0, 1, 2, 3]
    assert [a.device.index for a in assignments] == [1, 1, 1, 0]


def test_equal_devices_tie_break_to_the_earlier_device():
    first, second = fake_spec("nvidia", 0), fake_spec("nvidia", 1)
    assert workers_per_device(place_workload([first, second], 3)) == {"cuda:0": 2, "cuda:1": 1}


def test_memory_per_worker_caps_a_device_and_moves_the_rest_elsewhere():
    fast_small = fake_spec("nvidia", 0, free_gb=20.0, bf16=900.0)  # holds 2 workers of 10 GB
    slow_large = fake_spec("amd", 1, free_gb=190.0, bf16=100.0)
    counts = workers_per_device(place_workload([fast_small, slow_large], 6, memory_per_worker_gb=10))
    assert counts == {"cuda:0": 2, "cuda:1": 4}


def test_too_many_workers_for_the_free_memory_is_a_clear_error():
    gpu = fake_spec("nvidia", 0, free_gb=20.0)
    with pytest.raises(ValueError, match=r"3 workers of 10 GB do not fit; .* holds 2 \(cuda:0: 2\)"):
        place_workload([gpu], 3, memory_per_worker_gb=10)


def test_devices_without_the_dtype_or_torch_backend_get_no_workers():
    gpu = fake_spec("nvidia", 0)
    no_bf16 = fake_spec("nvidia", 1, bf16=None)
    opencl = fake_spec("opencl", 0, torch_usable=False)
    assert workers_per_device(place_workload([no_bf16, opencl, gpu], 4)) == {"cuda:0": 4}


def test_no_usable_device_is_a_clear_error():
    with pytest.raises(ValueError, match="none of the 1 device"):
        place_workload([fake_spec("opencl", torch_usable=False)], 2)


@pytest.mark.parametrize("workers", [0, -1, 2.0])
def test_num_workers_must_be_a_positive_integer(workers):
    with pytest.raises(ValueError, match="num_workers must be a positive integer"):
        place_workload([fake_spec("nvidia")], workers)


# ---------------------------------------------------------------- place_model_stages


def test_stages_are_contiguous_and_split_by_capability():
    fast = fake_spec("nvidia", 0, free_gb=80.0, bf16=300.0)
    slow = fake_spec("nvidia", 1, free_gb=80.0, bf16=100.0)
    placed = place_model_stages([fast, slow], [10.0] * 8)
    assert [p.device.index for p in placed] == [0, 0, 0, 0, 0, 0, 1, 1]
    assert [p.stage_index for p in placed] == list(range(8))


def test_a_stage_moves_on_when_the_current_device_is_full():
    fast_small = fake_spec("nvidia", 0, free_gb=15.0, bf16=900.0)
    slow_large = fake_spec("amd", 1, free_gb=100.0, bf16=100.0)
    placed = place_model_stages([fast_small, slow_large], [10.0, 10.0, 10.0])
    assert [p.device.index for p in placed] == [0, 1, 1]


def test_a_stage_bigger_than_any_device_names_the_stage():
    gpu = fake_spec("nvidia", 0, free_gb=16.0)
    with pytest.raises(ValueError, match="stage 1 needs 20 GB but the most free memory on any usable device is 16.00 GB"):
        place_model_stages([gpu], [4.0, 20.0])


def test_stages_that_do_not_fit_together_name_the_first_that_fails():
    a, b = fake_spec("nvidia", 0, free_gb=16.0), fake_spec("nvidia", 1, free_gb=16.0)
    with pytest.raises(ValueError, match=r"stage 3 \(10 GB\) does not fit"):
        place_model_stages([a, b], [10.0, 10.0, 5.0, 10.0])


def test_empty_stage_list_is_an_error():
    with pytest.raises(ValueError, match="stage_memory_gb is empty"):
        place_model_stages([fake_spec("nvidia")], [])


# ---------------------------------------------------------------- device_mesh_description


def test_one_mesh_per_torch_device_type():
    specs = [
        fake_spec("nvidia", 1),
        fake_spec("nvidia", 0),
        fake_spec("custom_asic", 0),
        fake_spec("cpu", 0),
        fake_spec("opencl", 0, torch_usable=False),
    ]
    meshes = {m.device_type: m for m in device_mesh_description(specs)}
    assert set(meshes) == {"cuda", specs[2].device.type, "cpu"}
    assert meshes["cuda"].mesh_shape == (2,)
    assert [s.index for s in meshes["cuda"].devices] == [0, 1]
    assert meshes["cuda"].process_group_backend == "nccl"
    assert meshes["cpu"].process_group_backend == "gloo"
    assert meshes["cpu"].world_size == 1


def test_more_than_one_mesh_dimension_name_is_rejected():
    with pytest.raises(ValueError, match="1-D meshes"):
        device_mesh_description([fake_spec("cpu")], mesh_dim_names=("dp", "tp"))


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def single_process_gloo_group(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_cpu_description_builds_a_real_device_mesh(single_process_gloo_group):
    from torch.distributed.device_mesh import init_device_mesh

    (description,) = device_mesh_description([fake_spec("cpu")], mesh_dim_names=("dp",))
    mesh = init_device_mesh(**description.init_kwargs())
    assert mesh.device_type == "cpu"
    assert mesh.mesh_dim_names == ("dp",)
    assert tuple(mesh.shape) == (1,)


def test_assignments_print_as_one_readable_line():
    gpu = fake_spec("nvidia", 0)
    (worker,) = place_workload([gpu], 1)
    (stage,) = place_model_stages([gpu], [2.5])
    (mesh,) = device_mesh_description([gpu])
    assert str(worker) == "worker 0 -> cuda:0 (fake nvidia 0)"
    assert str(stage) == "stage 0 (2.5 GB) -> cuda:0 (fake nvidia 0)"
    assert str(mesh) == "cuda mesh (1,) ('data_parallel',) over cuda:0 (nccl)"
