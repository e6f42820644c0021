"""Backward formulas: gradcheck in float64, and float32/bfloat16 gradients against autograd of plain PyTorch."""

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck

import kernel_pytorch.ops as kops
from kernel_cases import ref_apply_rope, ref_prefill_attention, ref_rms_norm, ref_silu_and_mul

ops = torch.ops.kernel_pytorch


def d(*shape, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).requires_grad_(True)


def test_gradcheck_rms_norm():
    assert gradcheck(lambda x, w: ops.rms_norm(x, w, 1e-6), (d(3, 7), d(7)))


def test_gradcheck_rms_norm_three_dims():
    assert gradcheck(lambda x, w: ops.rms_norm(x, w, 1e-3), (d(2, 3, 5), d(5)))


def test_gradcheck_fused_add_rms_norm_both_outputs():
    assert gradcheck(lambda x, r, w: ops.fused_add_rms_norm(x, r, w, 1e-6), (d(3, 6), d(3, 6), d(6)))


def test_gradcheck_fused_add_rms_norm_normalised_output_only():
    assert gradcheck(lambda x, r, w: ops.fused_add_rms_norm(x, r, w, 1e-6)[0], (d(3, 6), d(3, 6), d(6)))


def test_gradcheck_fused_add_rms_norm_residual_output_only():
    assert gradcheck(lambda x, r, w: ops.fused_add_rms_norm(x, r, w, 1e-6)[1] * 1.0, (d(3, 6), d(3, 6), d(6)))


def test_gradcheck_silu():
    assert gradcheck(ops.silu, (d(4, 5, scale=3),))


def test_gradcheck_silu_and_mul():
    assert gradcheck(ops.silu_and_mul, (d(3, 10, scale=3),))


@pytest.mark.parametrize("interleaved", [False, True], ids=["halves", "interleaved"])
@pytest.mark.parametrize("tables", ["shared", "per_batch"])
def test_gradcheck_apply_rope_x_cos_and_sin(interleaved, tables):
    b, s, h, dim = 2, 3, 2, 6
    cs_shape = (s, dim // 2) if tables == "shared" else (b, s, dim // 2)
    assert gradcheck(lambda x, c, sn: ops.apply_rope(x, c, sn, interleaved), (d(b, s, h, dim), d(*cs_shape), d(*cs_shape)))


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_gradcheck_softmax(dim):
    assert gradcheck(lambda x: ops.softmax(x, dim), (d(3, 4, 5),))


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "non_causal"])
@pytest.mark.parametrize("shape", [(1, 4, 2, 5, 5, 4), (1, 2, 2, 3, 6, 4)], ids=["gqa", "mha_chunk_3_of_6"])
def test_gradcheck_prefill_attention(shape, causal):
    B, H, Hkv, T, S, D = shape
    # fast_mode checks a random projection of the Jacobian: the full one costs seconds here.
    assert gradcheck(lambda q, k, v: ops.prefill_attention(q, k, v, causal, None),
                     (d(B, H, T, D), d(B, Hkv, S, D), d(B, Hkv, S, D)), fast_mode=True)


def test_gradcheck_matmul_vec():
    assert gradcheck(ops.matmul_vec, (d(5, 7), d(7)))


# ------------------------------------------------ gradients of the float32 kernels

def _plain_rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


PLAIN = {
    "rms_norm": (lambda x, w: ops.rms_norm(x, w, 1e-6), lambda x, w: _plain_rms(x, w, 1e-6), [(4, 33), (33,)]),
    "fused_add_rms_norm": (
        lambda x, r, w: sum(t.sum() * c for t, c in zip(ops.fused_add_rms_norm(x, r, w, 1e-6), (1.0, 0.5))),
        lambda x, r, w: _plain_rms(x + r, w, 1e-6).sum() + 0.5 * (x + r).sum(),
        [(4, 33), (4, 33), (33,)]),
    "silu": (ops.silu, torch.nn.functional.silu, [(5, 21)]),
    "silu_and_mul": (ops.silu_and_mul, lambda x: torch.nn.functional.silu(x[..., :13]) * x[..., 13:], [(3, 26)]),
    "apply_rope": (lambda x, c, s: ops.apply_rope(x, c, s, False), ref_apply_rope, [(2, 3, 4, 16), (3, 8), (3, 8)]),
    "softmax": (lambda x: ops.softmax(x, -1), lambda x: torch.softmax(x, -1), [(4, 19)]),
    "prefill_attention": (lambda q, k, v: ops.prefill_attention(q, k, v, True, None),
                          lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
                              q, k, v, is_causal=True, enable_gqa=True),
                          [(1, 4, 7, 16), (1, 2, 7, 16), (1, 2, 7, 16)]),
    "matmul_vec": (ops.matmul_vec, torch.mv, [(9, 17), (17,)]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(PLAIN))
def test_gradients_match_autograd_of_plain_pytorch(name, dtype):
    ours, plain, shapes = PLAIN[name]
    inputs = [torch.randn(*s) for s in shapes]
    a = [t.to(dtype).clone().requires_grad_(True) for t in inputs]
    b = [t.to(dtype).double().requires_grad_(True) for t in inputs]  # reference in double, same values
    out_a = ours(*a)
    out_b = plain(*b)
    g = torch.randn(out_b.shape, dtype=torch.float64)
    (out_a.double() * g).sum().backward()
    (out_b * g).sum().backward()
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=5e-2, rtol=5e-2)
    for i, (ta, tb) in enumerate(zip(a, b)):
        assert ta.grad is not None and ta.grad.dtype == dtype, f"input {i}"
        torch.testing.assert_close(ta.grad.double(), tb.grad, **tol, msg=lambda m: f"{name} input {i}: {m}")


def test_rope_backward_is_the_inverse_rotation():
    x = torch.randn(1, 4, 2, 8, requires_grad=True)
    cos, sin = torch.randn(4, 4), torch.randn(4, 4)
    norm = cos.hypot(sin)
    cos, sin = cos / norm, sin / norm  # unit rotations
    g = torch.randn(1, 4, 2, 8)
    (grad,) = torch.autograd.grad(kops.apply_rope(x, cos, sin), x, g)
    torch.testing.assert_close(grad, ref_apply_rope(g, cos, -sin), atol=1e-5, rtol=1e-5)


def test_prefill_backward_with_more_queries_than_keys_is_finite():
    q, k, v = (torch.randn(1, 2, 5, 8, requires_grad=True), torch.randn(1, 1, 3, 8, requires_grad=True),
               torch.randn(1, 1, 3, 8, requires_grad=True))
    out = ops.prefill_attention(q, k, v, True, None)
    torch.testing.assert_close(out, ref_prefill_attention(q.detach(), k.detach(), v.detach()), atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_gradients_on_my_asic_match_cpu(my_asic):
    x = torch.randn(3, 2, 4, 16)
    w = torch.randn(64)
    cos, sin = torch.randn(2, 8), torch.randn(2, 8)

    def run(device):
        xx = x.to(device).requires_grad_(True)
        ww = w.to(device).requires_grad_(True)
        h = kops.apply_rope(xx, cos.to(device), sin.to(device))
        y = kops.rms_norm(h.reshape(3, 2, 64), ww)
        y = kops.silu_and_mul(y)
        kops.softmax(y, -1).square().sum().backward()
        return xx.grad.cpu(), ww.grad.cpu()

    for a, b in zip(run(my_asic), run("cpu")):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# ------------------------------------------------ backward ops and double backward

def test_rms_norm_backward_op_equals_autograd_of_the_reference():
    x, w, g = torch.randn(3, 2, 40), torch.randn(40), torch.randn(3, 2, 40)
    xd, wd = x.double().requires_grad_(True), w.double().requires_grad_(True)
    expected = torch.autograd.grad(ref_rms_norm(xd, wd, 1e-5), (xd, wd), g.double())
    dx, dw = ops.rms_norm_backward(g, x, w, 1e-5)
    torch.testing.assert_close(dx, expected[0].float(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dw, expected[1].float(), atol=1e-4, rtol=1e-5)


def test_silu_and_mul_backward_op_equals_autograd_of_the_reference():
    x, g = torch.randn(3, 34) * 3, torch.randn(3, 17)
    xd = x.double().requires_grad_(True)
    (expected,) = torch.autograd.grad(ref_silu_and_mul(xd), xd, g.double())
    torch.testing.assert_close(ops.silu_and_mul_backward(g, x), expected.float(), atol=1e-5, rtol=1e-5)


def test_gradgradcheck_rms_norm():
    assert gradgradcheck(lambda x, w: ops.rms_norm(x, w, 1e-6), (d(3, 5), d(5)))


def test_gradgradcheck_silu_and_mul():
    assert gradgradcheck(ops.silu_and_mul, (d(2, 6, scale=3),))
