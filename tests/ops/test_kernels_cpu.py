"""Each op on cpu equals an independent plain-PyTorch reference, at every dtype and ISA level.

The cases (kernel_cases.py) cover one element, widths that are not a
multiple of the vector width, T = 1, a cache length of 1, transposed and
sliced inputs and zero-size tensors.
"""

import pytest
import torch

from kernel_cases import DTYPES, all_case_ids, build_case, check_case

DTYPE_IDS = [str(d).replace("torch.", "") for d in DTYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op,case", all_case_ids(), ids=[f"{o}-{c}" for o, c in all_case_ids()])
def test_op_matches_reference_on_cpu(op, case, dtype, cpu_isa):
    problem = check_case(op, case, dtype, "cpu")
    assert problem is None, f"{op}[{case}] {dtype} at {cpu_isa}: {problem}"


# The kernels that switch to non-temporal stores for large outputs (3/2 of one
# CPU's share of the last-level cache); the cases are small, so the fixture
# lowers the threshold.
STREAMED = [(o, c) for o, c in all_case_ids()
            if o in ("rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul", "apply_rope", "softmax")]


@pytest.fixture
def streaming_stores():
    """Every output written with streaming stores, whatever its size; the default afterwards."""
    from kernel_pytorch import _C

    _C._kp_set_streaming_stores_min_bytes(0)
    try:
        yield
    finally:
        _C._kp_set_streaming_stores_min_bytes(-1)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op,case", STREAMED, ids=[f"{o}-{c}" for o, c in STREAMED])
def test_op_matches_reference_with_streaming_stores(op, case, dtype, cpu_isa, streaming_stores):
    problem = check_case(op, case, dtype, "cpu")
    assert problem is None, f"{op}[{case}] {dtype} at {cpu_isa}, streaming stores: {problem}"


def test_streaming_store_threshold_defaults_to_a_cache_sized_byte_count():
    from kernel_pytorch import _C

    default = _C._kp_streaming_stores_min_bytes()
    assert 1 << 16 <= default <= 1 << 34  # 3/2 of one CPU's share of the last-level cache
    _C._kp_set_streaming_stores_min_bytes(123)
    try:
        assert _C._kp_streaming_stores_min_bytes() == 123
    finally:
        _C._kp_set_streaming_stores_min_bytes(-1)
    assert _C._kp_streaming_stores_min_bytes() == default


@pytest.mark.parametrize("op,case", all_case_ids(), ids=[f"{o}-{c}" for o, c in all_case_ids()])
def test_float64_runs_in_double_precision(op, case):
    problem = check_case(op, case, torch.float64, "cpu")
    assert problem is None, f"{op}[{case}] float64: {problem}"


def test_every_isa_level_gives_the_same_float32_result(cpu_isa):
    """The levels differ in speed, not in meaning: each agrees with generic to float32 rounding."""
    import kernel_pytorch.ops as kops

    x = torch.randn(7, 301)
    w = torch.randn(301)
    out = kops.rms_norm(x, w)
    kops.set_cpu_isa("generic")
    baseline = kops.rms_norm(x, w)
    kops.set_cpu_isa(cpu_isa)
    torch.testing.assert_close(out, baseline, atol=1e-6, rtol=1e-6)


def test_forced_level_is_reported_by_cpu_isa(cpu_isa):
    import kernel_pytorch.ops as kops

    assert kops.cpu_isa() == cpu_isa


def test_unknown_isa_level_raises_value_error_naming_the_levels():
    import kernel_pytorch.ops as kops

    with pytest.raises(ValueError, match="generic"):
        kops.set_cpu_isa("sse9")
    assert kops.cpu_isa() in ("generic", "avx2", "avx512", "avx512_bf16", "amx")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_outputs_are_new_contiguous_tensors(dtype):
    x = build_case("rms_norm", "transposed", dtype, "cpu")
    out = torch.ops.kernel_pytorch.rms_norm(*x)
    assert out.is_contiguous() and out.data_ptr() != x[0].data_ptr()


def test_softmax_of_huge_logits_is_finite_and_sums_to_one():
    x = torch.tensor([[1e4, -1e4, 0.0, 1e4 - 1.0]])
    y = torch.ops.kernel_pytorch.softmax(x, -1)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.sum(-1), torch.ones(1))


def test_softmax_matches_torch_softmax_exactly_in_shape_and_dim_semantics():
    x = torch.randn(2, 3, 4)
    for dim in (0, 1, 2, -1, -2, -3):
        torch.testing.assert_close(torch.ops.kernel_pytorch.softmax(x, dim), torch.softmax(x, dim))


def test_causal_prefill_with_more_queries_than_keys_gives_zero_for_rows_that_see_nothing():
    # Bottom-right alignment with T=5 queries and S=3 keys: query i sees keys j <= i - 2,
    # so queries 0 and 1 see none and produce 0 (not NaN).
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8)
    out = torch.ops.kernel_pytorch.prefill_attention(q, k, v, True, None)
    assert torch.isfinite(out).all()
    assert out[:, :, :2].abs().max() == 0
    assert out[:, :, 2:].abs().max() > 0


def test_causal_prefill_equals_sdpa_is_causal_when_lengths_match():
    q, k, v = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(torch.ops.kernel_pytorch.prefill_attention(q, k, v, True, None), expected,
                               atol=2e-5, rtol=2e-5)


def test_decode_with_full_lengths_equals_decode_without_lengths():
    q, k, v = torch.randn(2, 8, 16), torch.randn(2, 2, 11, 16), torch.randn(2, 2, 11, 16)
    full = torch.full((2,), 11, dtype=torch.int64)
    torch.testing.assert_close(torch.ops.kernel_pytorch.decode_attention(q, k, v, full, None),
                               torch.ops.kernel_pytorch.decode_attention(q, k, v, None, None))


def test_decode_ignores_cache_entries_past_each_length():
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 2, 10, 8), torch.randn(2, 2, 10, 8)
    lengths = torch.tensor([3, 7])
    out = torch.ops.kernel_pytorch.decode_attention(q, k, v, lengths, None)
    k2, v2 = k.clone(), v.clone()
    k2[0, :, 3:], v2[0, :, 3:] = 1e3, 1e3
    k2[1, :, 7:], v2[1, :, 7:] = float("nan"), float("nan")
    torch.testing.assert_close(torch.ops.kernel_pytorch.decode_attention(q, k2, v2, lengths, None), out)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_int32_lengths_are_accepted(dtype):
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 2, 10, 8), torch.randn(2, 2, 10, 8)
    out = torch.ops.kernel_pytorch.decode_attention(q, k, v, torch.tensor([3, 7], dtype=dtype), None)
    expected = torch.ops.kernel_pytorch.decode_attention(q, k, v, torch.tensor([3, 7]), None)
    torch.testing.assert_close(out, expected)


def test_fused_add_rms_norm_sum_is_rounded_to_the_input_dtype():
    x = torch.randn(4, 64).bfloat16()
    r = torch.randn(4, 64).bfloat16()
    _, new_residual = torch.ops.kernel_pytorch.fused_add_rms_norm(x, r, torch.ones(64).bfloat16(), 1e-6)
    assert torch.equal(new_residual, x + r)


@pytest.mark.parametrize("fused", [False, True])
def test_rms_norm_of_rows_whose_squares_are_denormal_matches_float_arithmetic(cpu_isa, fused):
    """bfloat16 rows of 1e-20 with eps = 0: every square (1e-40) is a float denormal, which vdpbf16ps
    flushes to zero; such a row must still be normalised to +-1, not to inf or NaN."""
    signs = torch.where(torch.arange(4 * 4096).reshape(4, 4096) % 3 == 0, -1.0, 1.0)
    x = (signs * 1e-20).bfloat16()
    w = torch.ones(4096).bfloat16()
    if fused:
        out, _ = torch.ops.kernel_pytorch.fused_add_rms_norm(x, torch.zeros_like(x), w, 0.0)
    else:
        out = torch.ops.kernel_pytorch.rms_norm(x, w, 0.0)
    torch.testing.assert_close(out.float(), signs, atol=0, rtol=2 ** -8)


def _rope_in_float(x, cos, sin, interleaved):
    xf, c, s = x.float(), cos.float()[None, :, None, :], sin.float()[None, :, None, :]
    out = torch.empty_like(xf)
    if interleaved:
        a, b = xf[..., 0::2], xf[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
    else:
        a, b = xf.chunk(2, -1)
        out = torch.cat([a * c - b * s, b * c + a * s], -1)
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_16_bit_rope_with_float32_cos_and_sin_rotates_the_right_pairs(cpu_isa, dtype, interleaved):
    """cos/sin in float32 while x is 16-bit: at the AVX-512 levels bfloat16 x is loaded as even/odd
    lanes, and the float32 tables must be laid out in that same order."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 4, 72, dtype=dtype)  # halves of 36: one full chunk and a scalar tail
    cos, sin = torch.randn(5, 36), torch.randn(5, 36)
    out = torch.ops.kernel_pytorch.apply_rope(x, cos, sin, interleaved)
    torch.testing.assert_close(out.float(), _rope_in_float(x, cos, sin, interleaved), atol=3e-2, rtol=2e-2)


def test_inputs_are_not_modified():
    x, r, w = torch.randn(3, 40), torch.randn(3, 40), torch.randn(40)
    before = (x.clone(), r.clone(), w.clone())
    torch.ops.kernel_pytorch.fused_add_rms_norm(x, r, w, 1e-6)
    for a, b in zip((x, r, w), before):
        assert torch.equal(a, b)


def test_calls_from_several_python_threads_at_once_give_the_single_thread_results():
    """The kernels' pool runs one region at a time; concurrent calls run inline, still correct."""
    import threading

    inputs = [(torch.randn(512, 1031), torch.randn(1031)) for _ in range(4)]
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        expected = [torch.ops.kernel_pytorch.rms_norm(x, w, 1e-6) for x, w in inputs]
    finally:
        torch.set_num_threads(previous)
    results = [[] for _ in inputs]

    def worker(i):
        for _ in range(20):
            results[i].append(torch.ops.kernel_pytorch.rms_norm(*inputs[i], 1e-6))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, outs in enumerate(results):
        assert len(outs) == 20
        for out in outs:
            torch.testing.assert_close(out, expected[i], atol=0, rtol=0)


_POOL_STRESS = """
import time, torch, kernel_pytorch  # noqa: F401
torch.manual_seed(0)
x, w = torch.randn(64, 4099), torch.randn(4099)
torch.set_num_threads(1)
expected = torch.ops.kernel_pytorch.rms_norm(x, w, 1e-6)
counts = [8, 1, 3, 8, 2, 5, 7, 4]
for i in range(4000):
    torch.set_num_threads(counts[i % len(counts)])
    out = torch.ops.kernel_pytorch.rms_norm(x, w, 1e-6)
    assert torch.equal(out, expected), f"call {i} at {counts[i % len(counts)]} threads differs"
    if i % 97 == 0:
        time.sleep(0.002)  # past the workers' polling: they block and must be woken
print("ok")
"""


def test_regions_with_changing_thread_counts_and_sleeping_workers_give_the_same_results(tmp_path):
    """The pool's workers read each region's job without a lock and only the region's own
    sleeping workers are woken: 4000 regions with thread counts changing every call (workers
    joining, sitting out, blocking between bursts) all give the one-thread result. In a
    subprocess with an 8-thread pool, so that a torn job crashing the process fails this test."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, KP_NUM_THREADS="8")
    run = subprocess.run([sys.executable, "-c", _POOL_STRESS], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout[-2000:] + run.stderr[-2000:]


@pytest.mark.parametrize("threads", [1, 2])
def test_results_do_not_depend_on_the_thread_count(threads):
    previous = torch.get_num_threads()
    try:
        x = torch.randn(64, 257)
        w = torch.randn(257)
        torch.set_num_threads(1)
        single = torch.ops.kernel_pytorch.rms_norm(x, w, 1e-6)
        torch.set_num_threads(threads)
        torch.testing.assert_close(torch.ops.kernel_pytorch.rms_norm(x, w, 1e-6), single, atol=0, rtol=0)
    finally:
        torch.set_num_threads(previous)
