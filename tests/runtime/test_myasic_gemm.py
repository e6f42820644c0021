"""The simulator's gemm entry (kpdr.h core ops) against numpy, in both memory modes."""

import ctypes

import numpy as np
import pytest

from kpdr_gemm import DTYPE_BFLOAT16, DTYPE_FLOAT32, INVALID_VALUE, GemmArgs, gemm_case, gemm_entry

CASES = [
    dict(batch=1, m=17, n=33, k=65),
    dict(batch=3, m=17, n=33, k=65, trans_a=1),
    dict(batch=2, m=9, n=31, k=40, trans_b=1, alpha=-0.5, beta=2.0),
    dict(batch=2, m=8, n=8, k=8, trans_a=1, trans_b=1, beta=1.0, pad=5),
    dict(batch=4, m=5, n=7, k=3, broadcast_b=True, alpha=2.0, beta=0.25),
    dict(batch=1, m=6, n=4, k=0, beta=3.0),
]
TOLERANCE = {DTYPE_FLOAT32: dict(rtol=1e-5, atol=1e-4), DTYPE_BFLOAT16: dict(rtol=1e-2, atol=6e-2)}


@pytest.mark.parametrize("host_addressable", [0, 1])
@pytest.mark.parametrize("dtype", [DTYPE_FLOAT32, DTYPE_BFLOAT16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_gemm_matches_numpy(load_myasic, host_addressable, dtype, case):
    runtime = load_myasic(f"host_addressable={host_addressable}")
    result, reference = gemm_case(runtime, dtype=dtype, **case)
    np.testing.assert_allclose(result, reference, **TOLERANCE[dtype])


def test_negative_sizes_are_rejected_with_a_message(myasic):
    args = GemmArgs(dtype=DTYPE_FLOAT32, batch=1, m=-1, n=1, k=1)
    code = gemm_entry(myasic)(ctypes.byref(args), myasic.stream(0))
    assert code == INVALID_VALUE
    assert "negative size" in myasic.last_error_message()
