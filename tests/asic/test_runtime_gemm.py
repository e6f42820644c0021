"""mm / bmm / addmm / baddbmm / linear / matmul on the simulator, in both memory modes.

With MY_ASIC_HOST_ADDRESSABLE=0 they run through the runtime's GEMM entry (kpdr.h's
core-op section, the simulator's kp::gemm); with host-addressable memory ATen's BLAS runs
in place. Either way results match torch on the CPU and the GEMM ops never fall back
(beyond the two calls the script sends there on purpose: float64 and a shape error).
"""

import json

import pytest

from device_subprocess import last_line, run_python
from gemm_cases import script


@pytest.mark.parametrize("host_addressable", ["0", "1"])
def test_gemm_matches_the_cpu_for_transposed_strided_batched_alpha_beta_cases(host_addressable):
    out = run_python(script(("float32", "bfloat16")), env={"MY_ASIC_HOST_ADDRESSABLE": host_addressable})
    result = json.loads(last_line(out))
    assert result["checked"] >= 2 * 27
    assert result["gemm_fallbacks"] == {}


def test_float16_gemm_through_the_runtime_matches_the_cpu():
    out = run_python(script(("float16",)), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    assert json.loads(last_line(out))["gemm_fallbacks"] == {}
