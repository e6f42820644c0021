"""Pointwise ops and reductions (kpdr.h's core-op `pointwise` and `reduce` entries) on the
OpenCL runtime: PoCL in CI, a GPU where present. The OpenCL C is generated per op code and
dtypes and cached like the fixed kernels."""

import json
import sys
from pathlib import Path

import pytest

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from pointwise_cases import script  # noqa: E402


@pytest.mark.parametrize("dtypes", [("float32",), ("bfloat16", "float16")], ids=["float32", "half-types"])
def test_pointwise_and_reductions_match_the_cpu_without_falling_back(dtypes):
    result = json.loads(run_on_opencl(script(dtypes)).strip().splitlines()[-1])
    assert result["checked"] >= 100 * len(dtypes)
    assert result["fallbacks"] == {}
    assert result["errors"] == 4


def test_the_entries_match_numpy_through_the_abi(load_opencl):
    from kpdr_pointwise import check_entries

    check_entries(load_opencl())


def test_contiguous_misaligned_and_column_layouts_match_numpy(load_opencl):
    from kpdr_pointwise import check_layouts

    check_layouts(load_opencl())


def test_threads_launching_one_kernel_with_their_own_arguments_each_get_their_own_result(load_opencl):
    # One kernel object serves every launch of an op; its arguments are set under its lock and
    # only where they changed (kernel_cache.h), so a thread must never run with another's.
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from kpdr_pointwise import pointwise_case, reduce_case

    runtime = load_opencl()

    def work(seed):
        rng = np.random.default_rng(seed)
        for step in range(12):
            rows = 8 + (seed * 12 + step) % 23
            a, b = rng.standard_normal((rows, 64), dtype=np.float32), rng.standard_normal((rows, 64), dtype=np.float32)
            alpha = float(seed + 1)
            code, got = pointwise_case(runtime, "add", [a, b], (rows, 64), alpha=alpha)
            assert code == 0
            np.testing.assert_allclose(got, a + alpha * b, rtol=1e-6, atol=1e-5)
            code, got = reduce_case(runtime, "sum", a, (1,))
            assert code == 0
            np.testing.assert_allclose(got, a.sum(axis=1), rtol=1e-5, atol=1e-4)
        return seed

    with ThreadPoolExecutor(4) as pool:
        assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]


def test_split_column_reductions_back_to_back_on_one_stream_each_finish_their_own_outputs(load_opencl):
    # Rows split over work-groups whose last one finishes the outputs count themselves on the
    # stream's counters (Stream::counters): each launch must leave them zeroed for the next.
    import ctypes

    import numpy as np
    from kpdr_pointwise import DTYPE_FLOAT32, REDUCE, ReduceArgs, Session, entry

    runtime = load_opencl()
    session = Session(runtime)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((30000, 8)).astype(np.float32)
    source = session.upload(x)
    launches = []
    for op in ("sum", "amax", "sum", "amin", "mean"):
        args = ReduceArgs(op=REDUCE[op], ndim=2, in_dtype=DTYPE_FLOAT32, out_dtype=DTYPE_FLOAT32, reduce_mask=0b01)
        args.sizes[0], args.sizes[1] = x.shape
        args.in_strides[0], args.in_strides[1] = 8, 1
        args.out_strides[1] = 1
        args.input, args.out = source, session.upload(np.zeros(8, dtype=np.float32))
        assert entry(runtime, "reduce", ReduceArgs)(ctypes.byref(args), session.stream) == 0
        launches.append((op, args))
    want = {"sum": x.sum(axis=0, dtype=np.float64), "amax": x.max(axis=0), "amin": x.min(axis=0),
            "mean": x.mean(axis=0, dtype=np.float64)}
    for op, args in launches:
        np.testing.assert_allclose(session.download(args.out, (8,)), want[op], rtol=1e-5, atol=1e-3, err_msg=op)
    session.close()


def test_sums_over_empty_slices_write_zeros(load_opencl):
    # Rows of length 0 (count = 0, outputs > 0): the launch plan once divided by a chunk of 0
    # elements (undefined behaviour: a SIGFPE in NVIDIA's build of the op_db sweep).
    import ctypes

    import numpy as np
    from kpdr_pointwise import DTYPE_FLOAT32, REDUCE, ReduceArgs, Session, entry

    runtime = load_opencl()
    session = Session(runtime)
    for mask, outputs in ((0b10, 3), (0b11, 1)):
        args = ReduceArgs(op=REDUCE["sum"], ndim=2, in_dtype=DTYPE_FLOAT32, out_dtype=DTYPE_FLOAT32, reduce_mask=mask)
        args.sizes[0], args.sizes[1] = 3, 0
        args.in_strides[0], args.in_strides[1] = 1, 1
        args.out_strides[0] = 1 if mask == 0b10 else 0
        args.input, args.out = None, session.upload(np.full(outputs, 7.0, dtype=np.float32))
        assert entry(runtime, "reduce", ReduceArgs)(ctypes.byref(args), session.stream) == 0
        np.testing.assert_array_equal(session.download(args.out, (outputs,)), np.zeros(outputs, dtype=np.float32))
    session.close()


MLP_STEP = """
import json, torch, kernel_pytorch
from torch import nn

def train(device, steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen).to(device)
        y = torch.randn(16, 10, generator=gen).to(device)
        loss = nn.functional.mse_loss(model(x), y) + 1e-3 * model[0].weight.abs().sum()
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss.item())
    return losses

cpu = train("cpu")
torch.my_asic.reset_fallback_stats()
device = train("my_asic")
print(json.dumps({"cpu": cpu, "device": device, "fallbacks": torch.my_asic.fallback_stats()}))
"""


def test_an_mlp_training_step_with_adamw_runs_without_falling_back():
    result = json.loads(run_on_opencl(MLP_STEP).strip().splitlines()[-1])
    # Linear (GEMM) + GELU/ReLU/Tanh + MSE + abs/sum + AdamW's pointwise updates: all native.
    assert result["fallbacks"] == {}, result["fallbacks"]
    for a, b in zip(result["cpu"], result["device"]):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (result["cpu"], result["device"])
