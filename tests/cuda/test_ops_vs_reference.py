"""Each kernel_pytorch op on CUDA tensors against its float64 plain-PyTorch
reference, at float32, bfloat16 and float16, at odd sizes and layouts that
take every code path (16-byte vectors, scalar fallbacks, rows kept in
registers or re-read, one or many cache splits)."""

import math

import pytest
import torch

import kernel_pytorch.ops as kops
from references import DTYPES, TOL
import references as ref

DEV = "cuda"


def close(out, expected, dtype, scale=1.0):
    tol = TOL[dtype]
    torch.testing.assert_close(out.double(), expected, atol=tol["atol"] * scale, rtol=tol["rtol"] * scale)


def randn(*shape, dtype, scale=1.0):
    return (torch.randn(*shape, device=DEV, dtype=torch.float32) * scale).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 4096), (17, 4100), (2, 3, 1000), (33, 8192), (2, 50000), (2, 70000), (2, 70001)])
def test_rms_norm_matches_the_reference(dtype, shape):
    x, w = randn(*shape, dtype=dtype), randn(shape[-1], dtype=dtype)
    close(kops.rms_norm(x, w, 1e-5), ref.rms_norm(x, w, 1e-5), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_reads_rows_with_a_stride(dtype):
    wide = randn(9, 4160, dtype=dtype)
    x, w = wide[:, 8:4104], randn(4096, dtype=dtype)  # rows 4160 apart, misaligned start
    close(kops.rms_norm(x, w), ref.rms_norm(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 8), (3, 7), (64, 4096), (5, 12291)])
def test_fused_add_rms_norm_matches_the_reference(dtype, shape):
    x, r, w = randn(*shape, dtype=dtype), randn(*shape, dtype=dtype), randn(shape[-1], dtype=dtype)
    out, s = kops.fused_add_rms_norm(x, r, w, 1e-6)
    expected_out, expected_s = ref.fused_add_rms_norm(x, r, w, 1e-6)
    assert torch.equal(s, expected_s)
    close(out, expected_out, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5, 9), (4096, 1024), (1000003,)])
def test_silu_matches_the_reference(dtype, shape):
    x = randn(*shape, dtype=dtype, scale=3)
    close(kops.silu(x), ref.silu(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2), (3, 14), (7, 2 * 4096), (2, 3, 2 * 1001), (70000, 16)])
def test_silu_and_mul_matches_the_reference(dtype, shape):
    x = randn(*shape, dtype=dtype, scale=3)
    close(kops.silu_and_mul(x), ref.silu_and_mul(x), dtype)


def rope_tables(batch, seq, half, per_batch, dtype):
    pos = torch.arange(seq, device=DEV, dtype=torch.float32)
    if per_batch:
        pos = pos[None, :] + torch.arange(batch, device=DEV)[:, None] * 7
    freqs = 10000 ** (-torch.arange(half, device=DEV, dtype=torch.float32) / half)
    ang = pos[..., None] * freqs
    return ang.cos().to(dtype), ang.sin().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape,per_batch", [((1, 1, 1, 2), False), ((2, 5, 3, 64), False), ((2, 33, 32, 128), True),
                                             ((1, 7, 4, 6), True), ((3, 17, 8, 80), False)])
def test_apply_rope_matches_the_reference(dtype, interleaved, shape, per_batch):
    B, S, H, D = shape
    x = randn(*shape, dtype=dtype)
    cos, sin = rope_tables(B, S, D // 2, per_batch, dtype)
    close(kops.apply_rope(x, cos, sin, interleaved), ref.apply_rope(x, cos, sin, interleaved), dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_apply_rope_takes_float32_tables_and_strided_heads(dtype):
    qkv = randn(2, 9, 3 * 8, 128, dtype=dtype)
    x = qkv[:, :, 8:16]  # the k heads of a fused qkv projection
    cos, sin = rope_tables(2, 9, 64, False, torch.float32)
    close(kops.apply_rope(x, cos, sin), ref.apply_rope(x, cos, sin, False), dtype)


@pytest.mark.cuda_autograd
def test_apply_rope_backward_is_the_inverse_rotation():
    x = randn(2, 5, 4, 64, dtype=torch.float32).requires_grad_()
    cos, sin = rope_tables(2, 5, 32, False, torch.float32)
    g = torch.randn_like(x)
    kops.apply_rope(x, cos, sin).backward(g)
    torch.testing.assert_close(x.grad, kops.apply_rope(g, cos, -sin))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((1, 1), -1), ((3, 7), -1), ((5, 4096), -1), ((2, 50000), -1), ((2, 70001), -1),
                                       ((6, 5, 9), 1), ((128, 1000), 0)])
def test_softmax_matches_the_reference(dtype, shape, dim):
    x = randn(*shape, dtype=dtype, scale=4)
    close(kops.softmax(x, dim), ref.softmax(x, dim), dtype)


def test_softmax_of_a_fully_masked_row_is_nan_like_torch():
    x = torch.full((2, 64), float("-inf"), device=DEV)
    x[1, 3] = 0.0
    out = kops.softmax(x)
    assert torch.isnan(out[0]).all()
    assert out[1, 3] == 1.0


def decode_case(B, H, Hkv, T, D, dtype):
    q = randn(B, H, D, dtype=dtype)
    k, v = randn(B, Hkv, T, D, dtype=dtype), randn(B, Hkv, T, D, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,H,Hkv,T,D", [(1, 1, 1, 1, 128), (3, 8, 2, 1000, 128), (2, 6, 2, 333, 64), (2, 32, 2, 77, 128),
                                         (1, 4, 4, 5000, 80), (2, 2, 1, 129, 256), (1, 3, 1, 20000, 128),
                                         (2, 4, 2, 100, 127), (1, 2, 1, 50, 300)])
def test_decode_attention_matches_the_reference(dtype, B, H, Hkv, T, D):
    q, k, v = decode_case(B, H, Hkv, T, D, dtype)
    close(kops.decode_attention(q, k, v), ref.decode_attention(q, k, v), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_attention_respects_per_sequence_lengths(dtype):
    q, k, v = decode_case(4, 8, 2, 3000, 128, dtype)
    lengths = torch.tensor([1, 3000, 1234, 129], device=DEV)
    close(kops.decode_attention(q, k, v, lengths, 0.3), ref.decode_attention(q, k, v, lengths, 0.3), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_attention_reads_a_strided_cache(dtype):
    # A cache allocated for 4096 positions, of which the first 1500 are used.
    big_k, big_v = randn(2, 2, 4096, 128, dtype=dtype), randn(2, 2, 4096, 128, dtype=dtype)
    k, v = big_k[:, :, :1500], big_v[:, :, :1500]
    q = randn(2, 8, 128, dtype=dtype)
    close(kops.decode_attention(q, k, v), ref.decode_attention(q, k, v), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("Tq,S,causal", [(1, 1, True), (17, 17, True), (64, 64, False), (5, 40, True), (40, 5, True),
                                         (33, 70, False)])
def test_prefill_attention_matches_the_reference(dtype, Tq, S, causal):
    q = randn(2, 4, Tq, 64, dtype=dtype)
    k, v = randn(2, 2, S, 64, dtype=dtype), randn(2, 2, S, 64, dtype=dtype)
    close(kops.prefill_attention(q, k, v, causal), ref.prefill_attention(q, k, v, causal), dtype, scale=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N,K", [(1, 1), (3, 7), (4096, 4096), (1000, 4099), (17, 16384), (5, 100000)])
def test_matmul_vec_matches_the_reference(dtype, N, K):
    w, x = randn(N, K, dtype=dtype, scale=1 / math.sqrt(K)), randn(K, dtype=dtype)
    close(kops.matmul_vec(w, x), ref.matmul_vec(w, x), dtype, scale=2)


def test_matmul_vec_reads_a_weight_with_a_row_stride():
    big = randn(64, 1024, dtype=torch.bfloat16, scale=0.05)
    w, x = big[:, :1000], randn(1000, dtype=torch.bfloat16)
    close(kops.matmul_vec(w, x), ref.matmul_vec(w, x), torch.bfloat16, scale=2)


@pytest.mark.parametrize("op", ["rms_norm", "silu_and_mul", "softmax", "matmul_vec", "decode_attention"])
def test_float64_runs_the_reference_in_double_precision(op):
    x = torch.randn(4, 64, device=DEV, dtype=torch.float64)
    if op == "rms_norm":
        w = torch.randn(64, device=DEV, dtype=torch.float64)
        torch.testing.assert_close(kops.rms_norm(x, w), ref.rms_norm(x, w, 1e-6))
    elif op == "silu_and_mul":
        torch.testing.assert_close(kops.silu_and_mul(x), ref.silu_and_mul(x))
    elif op == "softmax":
        torch.testing.assert_close(kops.softmax(x), ref.softmax(x, -1))
    elif op == "matmul_vec":
        v = torch.randn(64, device=DEV, dtype=torch.float64)
        torch.testing.assert_close(kops.matmul_vec(x, v), ref.matmul_vec(x, v))
    else:
        q, k, v = decode_case(2, 4, 2, 33, 64, torch.float64)
        torch.testing.assert_close(kops.decode_attention(q, k, v), ref.decode_attention(q, k, v))


def test_empty_inputs_give_empty_outputs():
    assert kops.rms_norm(torch.empty(0, 64, device=DEV), torch.ones(64, device=DEV)).shape == (0, 64)
    assert kops.silu_and_mul(torch.empty(0, 8, device=DEV)).shape == (0, 4)
    assert kops.matmul_vec(torch.empty(0, 8, device=DEV), torch.ones(8, device=DEV)).shape == (0,)
    assert torch.equal(kops.matmul_vec(torch.empty(3, 0, device=DEV), torch.empty(0, device=DEV)),
                       torch.zeros(3, device=DEV))


def test_mismatched_devices_raise_an_error_naming_the_fix():
    x = torch.randn(4, 64, device=DEV)
    with pytest.raises(RuntimeError, match=r"weight is on cpu but x is on cuda:0; move both to one device"):
        kops.rms_norm(x, torch.ones(64))


def test_ops_run_on_the_current_stream_and_device():
    s = torch.cuda.Stream()
    x, w = torch.randn(256, 4096, device=DEV), torch.randn(4096, device=DEV)
    expected = kops.rms_norm(x, w)
    with torch.cuda.stream(s):
        s.wait_stream(torch.cuda.current_stream())
        torch.cuda._sleep(10_000_000)  # keeps the stream busy: the op must queue behind it
        out = kops.rms_norm(x, w)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(out, expected)
