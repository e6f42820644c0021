"""Every myccl collective gives the result torch.distributed specifies, on 2
and 4 ranks, with host-addressable device memory (gloo works on host aliases)
and without (staging copies through the runtime).

Rank r contributes values derived from r (collective_programs.every_collective);
one group run per configuration, one test per collective.
"""

import pytest
import torch

from ranks import run_ranks

CONFIGURATIONS = {
    # name: (world size, environment)
    "2 ranks": (2, {}),
    "4 ranks": (4, {"MY_ASIC_DEVICE_COUNT": "4"}),
    # A slow simulated link makes the staging copies take milliseconds, so a
    # result read before its copy back had landed would show.
    "2 ranks, copies (not host addressable)": (
        2, {"MY_ASIC_HOST_ADDRESSABLE": "0", "MY_ASIC_COPY_BANDWIDTH_GBPS": "0.2"}),
}


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=pytest.mark.slow) if CONFIGURATIONS[name][0] > 2 else name
            for name in CONFIGURATIONS])
def group(request):
    """(world size, per-rank results of every collective) for one configuration."""
    world, env = CONFIGURATIONS[request.param]
    return world, run_ranks("collective_programs:every_collective", world, env=env)


def each_rank(group):
    world, results = group
    return [(rank, world, results[rank]) for rank in range(world)]


def test_each_rank_uses_its_own_device_and_myccl(group):
    world, results = group
    for rank, _, res in each_rank(group):
        assert res["backend"] == "my_asic:myccl,cpu:gloo"
        assert res["device"].startswith("my_asic:")
    if world == 4:
        assert [r["device"] for r in results] == [f"my_asic:{i}" for i in range(4)]


@pytest.mark.parametrize(
    "op, expected",
    [
        ("sum", lambda w: w * (w + 1) / 2),
        ("avg", lambda w: (w + 1) / 2),
        ("product", lambda w: float(torch.arange(1, w + 1).prod())),
        ("min", lambda w: 1.0),
        ("max", lambda w: float(w)),
    ],
)
def test_all_reduce(group, op, expected):
    for rank, world, res in each_rank(group):
        assert res[f"all_reduce_{op}"] == [expected(world)] * 3, f"rank {rank}"


def test_all_reduce_int64_and_bfloat16(group):
    for rank, world, res in each_rank(group):
        total = world * (world + 1) // 2
        assert res["all_reduce_int64_sum"] == [total] * 3
        assert res["all_reduce_bf16_sum"] == [float(total)] * 3


def test_all_reduce_premul_sum(group):
    for rank, world, res in each_rank(group):
        assert res["all_reduce_premul_sum_half"] == [world * (world + 1) / 4] * 3


def test_all_reduce_of_a_large_tensor(group):
    expected = float((torch.arange(100_000, dtype=torch.float32) * sum(range(1, group[0] + 1))).sum())
    for rank, world, res in each_rank(group):
        assert res["all_reduce_large_checksum"] == pytest.approx(expected, rel=1e-6)


def test_async_all_reduce_wait_orders_later_device_work(group):
    for rank, world, res in each_rank(group):
        assert res["all_reduce_async_then_compute"] == [world * (world + 1)] * 3


def test_wait_orders_a_side_stream_that_is_current(group):
    for rank, world, res in each_rank(group):
        assert res["all_reduce_on_a_side_stream"] == [world * (world + 1) / 2 + 1] * 3


def test_async_all_reduce_future_yields_the_result(group):
    for rank, world, res in each_rank(group):
        assert res["all_reduce_future_value"] == [world * (world + 1) / 2] * 3


def test_broadcast(group):
    for rank, world, res in each_rank(group):
        assert res["broadcast_from_last"] == [10.0 * (world - 1)] * 3


def test_reduce_reaches_the_root_and_leaves_other_inputs_unchanged(group):
    for rank, world, res in each_rank(group):
        expected = world * (world + 1) / 2 if rank == 0 else rank + 1.0
        assert res["reduce_to_0"] == [expected] * 3, f"rank {rank}"


def test_all_gather(group):
    for rank, world, res in each_rank(group):
        assert res["all_gather"] == [[float(r), float(-r)] for r in range(world)]


def test_all_gather_into_tensor(group):
    for rank, world, res in each_rank(group):
        assert res["all_gather_into_tensor"] == [v for r in range(world) for v in (float(r), float(-r))]


def test_reduce_scatter(group):
    for rank, world, res in each_rank(group):
        total = sum(r * 100 + rank for r in range(world))
        assert res["reduce_scatter"] == [float(total)] * 2


def test_reduce_scatter_tensor_sum_and_avg(group):
    for rank, world, res in each_rank(group):
        total = sum(r * 100 + rank for r in range(world))
        assert res["reduce_scatter_tensor"] == [float(total)] * 2
        assert res["reduce_scatter_tensor_avg"] == [total / world] * 2
        assert res["reduce_scatter_input_unchanged"]


def test_all_to_all(group):
    for rank, world, res in each_rank(group):
        assert res["all_to_all"] == [[float(src * 10 + rank)] for src in range(world)]
        assert res["all_to_all_single"] == [float(src * 10 + rank) for src in range(world)]


def test_all_to_all_single_with_uneven_splits(group):
    for rank, world, res in each_rank(group):
        assert res["all_to_all_single_uneven"] == [float(src * 10 + rank) for src in range(world) for _ in range(rank + 1)]


def test_gather(group):
    for rank, world, res in each_rank(group):
        if rank == 0:
            assert res["gather_to_0"] == [[float(r), float(r * r)] for r in range(world)]


def test_scatter(group):
    for rank, world, res in each_rank(group):
        assert res["scatter_from_0"] == [rank * 7.0] * 2


def test_send_recv(group):
    for rank, world, res in each_rank(group):
        assert res["isend_irecv_ring"] == [float((rank - 1) % world)] * 3
        if rank == 1:
            assert res["send_recv_0_to_1"] == [42.0] * 3


def test_barrier_and_cpu_tensors_in_the_same_group(group):
    for rank, world, res in each_rank(group):
        assert res["barrier"] is True
        assert res["cpu_tensor_through_gloo"] == [world * (world + 1) / 2] * 2


def test_destroy_process_group_stops_the_transports_threads(group):
    # Checked after every collective ran: none of them may keep a process
    # group alive (e.g. by importing torch._dynamo, which holds on to it).
    for rank, _, res in each_rank(group):
        if res["gloo_worker_threads_after_destroy"] is not None:
            assert res["gloo_worker_threads_after_destroy"] == 0, rank


def test_destroy_process_group_shuts_myccl_down_even_while_the_group_is_referenced():
    results = run_ranks("collective_programs:shutdown_while_something_holds_the_group", 2)
    for res in results:
        assert res["all_reduce"] == [3.0] * 3
        if res["gloo_worker_threads_after_destroy"] is not None:
            assert res["gloo_worker_threads_after_destroy"] == 0
        assert "was called after its process group was shut down (destroy_process_group())" in res["after_shutdown"]
        assert res["device_still_usable"] == [6.0] * 3
