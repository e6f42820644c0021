"""The HAL's device-mesh descriptions launch real process groups: myccl for a
my_asic mesh, and one job mixing CPU and my_asic ranks that trains like a
single process."""

import pytest

from ranks import run_ranks
from training_programs import training_reference


@pytest.fixture(scope="module")
def reference():
    return training_reference("cpu")


def parameters(result):
    return {k: v for k, v in result.items() if not k.startswith("_")}


def assert_same_parameters(result, reference):
    for name, expected in reference.items():
        assert parameters(result)[name] == pytest.approx(expected, abs=1e-5), name


def test_my_asic_mesh_helper_runs_ddp_over_myccl(reference):
    results = run_ranks("training_programs:hal_mesh_ddp", 2, env={"MY_ASIC_DEVICE_COUNT": "2"})
    for rank, result in enumerate(results):
        assert result["_device"] == f"my_asic:{rank}"
        assert result["_backend"] == "my_asic:myccl,cpu:gloo"
        assert result["_mesh"] == ["my_asic", [2]]
        assert_same_parameters(result, reference)


def test_heterogeneous_cpu_and_my_asic_job_trains_like_one_process(reference):
    # HAL here: my_asic:0, my_asic:1 and the CPU -> ranks 0, 1 on my_asic, rank 2 on the CPU.
    results = run_ranks("training_programs:heterogeneous_ddp", 3, env={"MY_ASIC_DEVICE_COUNT": "2"})
    assert [r["_device"] for r in results] == ["my_asic:0", "my_asic:1", "cpu"]
    for result in results:
        assert result["_backend"] == "my_asic:myccl,cpu:myccl"
        assert result["_mesh"] is None
        assert_same_parameters(result, reference)
