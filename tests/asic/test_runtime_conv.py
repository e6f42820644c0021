"""Convolution, max pooling and batch norm on the simulator off host memory.

With MY_ASIC_HOST_ADDRESSABLE=0 convolution runs through the runtime's im2col and gemm
entries, max pooling through max_pool2d, batch norm through the pointwise and reduce entries
(kpdr.h's core-op section). Results (outputs and every gradient) match torch on the CPU for
strides, padding, dilation, groups, 1-D and 2-D, non-contiguous and channels-last inputs,
and none of these ops falls back.
"""

import json

import pytest

from conv_cases import own_fallbacks, script
from device_subprocess import last_line, run_python

DTYPES = ("float32", "bfloat16", "float16")


def run(group, dtypes=DTYPES):
    return json.loads(last_line(run_python(script(group, dtypes), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))


def test_convolution_forward_and_backward_match_the_cpu_without_falling_back():
    result = run("conv")
    assert result["checked"] == 3 * 15 + 1
    assert own_fallbacks(result["fallbacks"]) == {}
    assert result["layouts"] == []


def test_max_pooling_forward_backward_and_indices_match_the_cpu_without_falling_back():
    result = run("pool")
    assert result["checked"] == 3 * 17
    assert own_fallbacks(result["fallbacks"]) == {}
    assert result["layouts"] == []


def test_unfold_and_fold_forward_and_backward_match_the_cpu_without_falling_back():
    result = run("unfold")
    assert result["checked"] == 3 * 5
    assert own_fallbacks(result["fallbacks"]) == {}


def test_batch_norm_training_eval_and_running_statistics_match_the_cpu_without_falling_back():
    result = run("batch_norm")
    assert result["checked"] == 3 * 6
    assert own_fallbacks(result["fallbacks"]) == {}


def test_the_steps_of_these_ops_run_on_the_device_entries_too():
    # Nothing of a float32 conv/pool/norm step takes the fallback: the bias adds, the
    # reductions and the copies they are composed of are entries as well. Only BatchNorm's
    # int64 step counter (num_batches_tracked += 1) is not a float op.
    for group in ("conv", "pool", "unfold", "batch_norm"):
        fallbacks = run(group, ("float32",))["fallbacks"]
        fallbacks = {op: n for op, n in fallbacks.items() if not (group == "batch_norm" and op.startswith("aten::add_"))}
        assert fallbacks == {}, (group, fallbacks)


def test_bad_arguments_raise_atens_errors():
    assert run("conv", ("float32",))["errors"] == ["channels", "Kernel size"]
    assert run("pool", ("float32",))["errors"] == ["pad should be"]
