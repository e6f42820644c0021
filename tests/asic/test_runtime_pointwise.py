"""Elementwise ops and reductions on the simulator, in both memory modes.

With MY_ASIC_HOST_ADDRESSABLE=0 they run through the runtime's generic pointwise and reduce
entries (kpdr.h's core-op section, the simulator's kp::pointwise / kp::reduce); with
host-addressable memory ATen's CPU kernels run in place. Either way results equal torch on
the CPU (broadcast, strided and non-contiguous operands, scalars, in-place and out= forms,
the activations' backward), none of these ops falls back, and what the entries do not take
(integers, float64, bad arguments) falls back to the CPU with ATen's results and errors.
"""

import json

import pytest

from device_subprocess import last_line, run_python
from pointwise_cases import script


def test_pointwise_and_reductions_through_the_runtime_match_the_cpu_without_falling_back():
    out = run_python(script(("float32", "bfloat16")), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    result = json.loads(last_line(out))
    assert result["checked"] >= 200
    assert result["fallbacks"] == {}
    assert result["errors"] == 4


def test_the_host_addressable_path_still_matches_the_cpu():
    # ATen's CPU kernels in place (host_kernels.h); amin, max()/min(), sign/sgn, mse_loss, clamp
    # with both bounds or only a max, and log-sigmoid have no native host kernel there and run
    # through the fallback, which copies nothing on host memory.
    out = run_python(script(("float32", "bfloat16")), env={"MY_ASIC_HOST_ADDRESSABLE": "1"})
    result = json.loads(last_line(out))
    assert result["checked"] >= 200
    assert set(result["fallbacks"]) <= {"aten::amin", "aten::sign", "aten::sgn", "aten::mse_loss",
                                          "aten::mse_loss_backward", "aten::clamp", "aten::clamp_",
                                          "aten::clamp_max", "aten::clamp_max_", "aten::log_sigmoid_forward",
                                          "aten::log_sigmoid_backward", "aten::max", "aten::min"}
    assert result["errors"] == 4


def test_float16_pointwise_through_the_runtime_matches_the_cpu():
    out = run_python(script(("float16",)), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    assert json.loads(last_line(out))["fallbacks"] == {}


def test_unsupported_dtypes_fall_back_and_are_counted():
    out = run_python("""
        import json, torch, kernel_pytorch
        torch.my_asic.reset_fallback_stats()
        i = torch.arange(6).to("my_asic")
        d = torch.ones(3, dtype=torch.float64).to("my_asic")
        f = torch.ones(3).to("my_asic")
        assert (i * 2).cpu().tolist() == [0, 2, 4, 6, 8, 10]  # integer arithmetic: native
        assert (d * 2).cpu().tolist() == [2.0, 2.0, 2.0]      # float64: not an entry dtype
        assert i.sum().item() == 15                           # integer sums: native (exact, into int64)
        assert d.sum().item() == 3.0                          # float64 sums: not an entry dtype
        assert (f + f).sum().item() == 6.0
        print(json.dumps(dict(torch.my_asic.fallback_stats())))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    stats = json.loads(last_line(out))
    assert stats.get("aten::mul.Tensor") == 1
    assert stats.get("aten::sum.dim_IntList") == 1  # the float64 one
    assert "aten::add.Tensor" not in stats
