"""Convolution, max pooling and batch norm on the OpenCL runtime (PoCL in CI, a GPU where present).

Convolution runs through the runtime's im2col and gemm entries, max pooling through its
max_pool2d entry, batch norm through pointwise and reduce (kpdr.h's core-op section).
"""

import json
import sys
from pathlib import Path

import pytest

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from conv_cases import own_fallbacks, script  # noqa: E402

DTYPES = ("float32", "bfloat16", "float16")


def test_the_im2col_and_max_pool2d_entries_match_numpy_through_the_abi(load_opencl):
    from kpdr_conv import check_entries

    check_entries(load_opencl())


@pytest.mark.parametrize("group, cases", [("conv", 3 * 15 + 1), ("pool", 3 * 17), ("unfold", 3 * 5), ("batch_norm", 3 * 6)])
def test_forward_and_backward_match_the_cpu_without_falling_back(group, cases):
    result = json.loads(run_on_opencl(script(group, DTYPES)).strip().splitlines()[-1])
    assert result["checked"] == cases
    assert own_fallbacks(result["fallbacks"]) == {}
    assert result["layouts"] == []


def test_the_conformance_kits_cnn_trains_like_the_cpu_for_20_steps_without_falling_back_on_these_ops():
    out = run_on_opencl("""
        import json
        from kernel_pytorch.asic.conformance import training
        training.one_intra_op_thread()
        result, extra = training.check("cnn_adam", 20)
        print(json.dumps({"result": result, "fallback": extra.get("fallback", {})}))
    """)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["result"] == "pass", result
    assert own_fallbacks(result["fallback"]) == {}, result["fallback"]
