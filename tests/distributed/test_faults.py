"""Failures give clear errors, never hangs: a dead peer, a peer that never
joins, tensors on the wrong device, sizes that do not fit, ranks that
disagree on sizes (caught by torch's TORCH_DISTRIBUTED_DEBUG=DETAIL checks)."""

import pytest

from fault_programs import GROUP_TIMEOUT_S
from ranks import run_ranks, start_ranks, wait_ranks

# Slack over the group timeout for a loaded 2-core machine.
SLACK_S = 20


def test_a_dead_peer_fails_the_next_collective_within_the_timeout():
    procs, workdir = start_ranks("fault_programs:peer_dies", 2)
    survivor, dead = wait_ranks(procs, workdir, deadline_s=120, expect_failure=True)
    assert procs[1].returncode == 3 and dead is None
    assert survivor["error_type"] == "DistBackendError"
    assert "myccl: all_reduce (rank 0 of 2, transport gloo) failed" in survivor["error"]
    assert survivor["elapsed_s"] < GROUP_TIMEOUT_S + SLACK_S


def test_a_peer_that_never_joins_times_out():
    procs, workdir = start_ranks("fault_programs:peer_never_arrives", 2, only_ranks=[0])
    (lonely,) = wait_ranks(procs, workdir, deadline_s=120)
    assert lonely["error"] is not None
    assert "timed out" in lonely["error"].lower() or "timeout" in lonely["error"].lower()
    assert lonely["elapsed_s"] < GROUP_TIMEOUT_S + SLACK_S


@pytest.fixture(scope="module")
def bad_arguments():
    return run_ranks("fault_programs:bad_arguments", 2)


@pytest.mark.parametrize(
    "case, message",
    [
        ("cpu_tensor_in_my_asic_group", "No backend type associated with device type cpu"),
        ("tensors_on_two_devices", "all tensors of one call must be on the same device"),
        ("wrong_output_size", "the output has 5 elements but must have world size (2) x input elements (2) = 4"),
        ("wrong_list_length", "the output list has 3 tensors but the group has 2 ranks"),
        ("mismatched_list_sizes", "an output tensor has 3 elements but the input has 2"),
        ("non_contiguous", "needs contiguous tensors; call .contiguous() first"),
        ("bad_root", "root rank 5 is outside the group of 2 ranks"),
        ("unsupported_op", "supports SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM"),
    ],
)
def test_bad_arguments_get_a_clear_error(bad_arguments, case, message):
    for result in bad_arguments:
        assert message in result[case]["error"]


def test_the_group_stays_usable_after_argument_errors(bad_arguments):
    for result in bad_arguments:
        assert result["usable_afterwards"] == [3.0, 3.0]


def test_ranks_disagreeing_on_sizes_are_reported_in_debug_mode():
    results = run_ranks("fault_programs:sizes_differ_across_ranks", 2, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    for result in results:
        assert "Detected mismatch between collectives on ranks" in result["error"]
        assert "Tensor shapes: " in result["error"]
