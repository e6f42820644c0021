"""DDP and FSDP2 (fully_shard) over myccl train exactly like one process on
the whole global batch; DeviceMesh("my_asic") and DTensor basics work.

Each rank trains on 1/world of every global batch on its own my_asic device
(training_programs.py); the reference trains on the full batch in this
process on the CPU.
"""

import pytest

from ranks import run_ranks
from training_programs import training_reference


@pytest.fixture(scope="module")
def reference():
    return training_reference("cpu")


def assert_same_parameters(result, reference):
    for name, expected in reference.items():
        assert result[name] == pytest.approx(expected, abs=1e-5), name


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_ddp_matches_single_process_training(world, reference):
    results = run_ranks("training_programs:ddp_training", world, env={"MY_ASIC_DEVICE_COUNT": str(world)})
    for rank, result in enumerate(results):
        assert_same_parameters(result, reference)


def test_ddp_matches_single_process_training_through_staging_copies(reference):
    # Device memory the host cannot address: gradients move through runtime copies.
    results = run_ranks("training_programs:ddp_training", 2, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    for result in results:
        assert_same_parameters(result, reference)


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_fsdp2_matches_single_process_training(world, reference):
    results = run_ranks("training_programs:fsdp2_training", world, env={"MY_ASIC_DEVICE_COUNT": str(world)})
    for rank, result in enumerate(results):
        assert_same_parameters(result, reference)
        assert result["0.weight.local_device"] == f"my_asic:{rank}"


@pytest.fixture(scope="module")
def dtensor_results():
    return run_ranks("training_programs:dtensor_basics", 2)


def test_distribute_tensor_shards_rows_over_the_my_asic_mesh(dtensor_results):
    for rank, res in enumerate(dtensor_results):
        assert res["mesh_device_type"] == "my_asic"
        assert res["local_shard_device"] == f"my_asic:{rank}"
        assert res["local_shard"] == res["expected_shard"]


def test_redistribute_to_replicate_gathers_the_whole_tensor(dtensor_results):
    for res in dtensor_results:
        assert res["redistributed_to_replicate"] == res["full"]


def test_sharded_matmul_equals_the_dense_product(dtensor_results):
    for res in dtensor_results:
        assert res["rowwise_placement"] == "S(0)"
        for got, want in zip(res["rowwise_matmul"], res["expected_matmul"]):
            assert got == pytest.approx(want, abs=1e-5)
        for got, want in zip(res["colwise_matmul"], res["expected_matmul"]):
            assert got == pytest.approx(want, abs=1e-5)
