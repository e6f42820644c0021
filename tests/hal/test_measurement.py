"""time_interleaved: the noise-robust side-by-side timing the HAL benchmark and demos use.

The workloads are real calls on the CPU; their durations are made distinct with sleeps
so each behaviour shows whatever the machine's load.
"""

import time

import pytest
import torch

from kernel_pytorch.hardware_abstraction.measurement import InterleavedTiming, time_interleaved

CPU = torch.device("cpu")


def sleeper(seconds, log=None, name=None):
    def call():
        if log is not None:
            log.append(name)
        time.sleep(seconds)
    return call


def test_each_workload_gets_its_own_median_and_round_medians():
    timed = time_interleaved({"short": (sleeper(0.002), CPU), "long": (sleeper(0.03), CPU)},
                             rounds=3, budget_s=0.2, warmup_s=0.0, settle_s=0.0)
    assert set(timed) == {"short", "long"}
    assert 0.002 <= timed["short"].median_s < timed["long"].median_s
    for timing in timed.values():
        assert len(timing.round_medians_s) == 3
        assert timing.low_s <= timing.median_s <= timing.high_s
        assert timing.noise >= 0


def test_rounds_interleave_the_workloads():
    log = []
    time_interleaved({"a": (sleeper(0.001, log, "a"), CPU), "b": (sleeper(0.001, log, "b"), CPU)},
                     rounds=3, budget_s=0.003, warmup_s=0.0, settle_s=0.0, batch_s=0.0)
    timed_calls = log[8:]  # after each workload's 3 warm-up calls and 1 sizing call
    runs = [name for i, name in enumerate(timed_calls) if i == 0 or timed_calls[i - 1] != name]
    assert runs == ["a", "b"] * 3


def test_warm_up_calls_are_not_counted():
    calls = []

    def stalls_at_first():
        calls.append(None)
        time.sleep(0.3 if len(calls) <= 3 else 0.001)  # a fresh process's first steps

    timed = time_interleaved({"step": (stalls_at_first, CPU)}, rounds=2, budget_s=0.02, warmup_s=0.0, settle_s=0.0)
    assert timed["step"].high_s < 0.1


def test_one_slow_call_moves_neither_the_median_nor_the_verdict():
    calls = []

    def one_stall():
        calls.append(None)
        time.sleep(0.3 if len(calls) == 12 else 0.002)

    timed = time_interleaved({"step": (one_stall, CPU)}, rounds=2, budget_s=0.04, warmup_s=0.0, settle_s=0.0)
    assert timed["step"].median_s < 0.1


def test_as_dict_is_json_ready():
    timing = time_interleaved({"x": (sleeper(0.001), CPU)}, rounds=2, budget_s=0.004, warmup_s=0.0)["x"]
    record = timing.as_dict()
    assert record["median_s"] == timing.median_s and record["spread_s"] == [timing.low_s, timing.high_s]
    assert record["rounds"] == 2 and record["samples"] == timing.samples >= 2


@pytest.mark.parametrize("kwargs, message", [
    ({"workloads": {}}, "at least one workload"),
    ({"rounds": 0}, "rounds must be >= 1"),
    ({"budget_s": -1.0}, "must be >= 0"),
])
def test_bad_arguments_are_named(kwargs, message):
    arguments = {"workloads": {"x": (sleeper(0.0), CPU)}, **kwargs}
    with pytest.raises(ValueError, match=message):
        time_interleaved(**arguments)


def test_noise_is_not_widened_by_one_disturbed_round():
    steady = InterleavedTiming(median_s=1.0, round_medians_s=(1.0, 1.02, 0.98, 1.0, 10.0), samples=50)
    assert steady.high_s == 10.0  # the spread shows the disturbed round
    assert steady.noise == pytest.approx(0.01)  # half the interquartile range of the round medians


def test_noise_grows_with_rounds_that_disagree():
    drifting = InterleavedTiming(median_s=1.0, round_medians_s=(0.6, 0.8, 1.0, 1.2, 1.4), samples=50)
    assert drifting.noise == pytest.approx(0.2)


def test_a_stalled_machine_does_not_stretch_the_run():
    # 50 ms calls against a 20 ms budget: each turn stops after its first timed call.
    start = time.perf_counter()
    timed = time_interleaved({"slow": (sleeper(0.05), CPU)}, rounds=2, budget_s=0.02, warmup_s=0.0, settle_s=0.0)
    assert timed["slow"].samples == 2
    assert time.perf_counter() - start < 2.0  # 4 warm-up, 2 uncounted and 2 timed calls: 0.4 s
