"""Fake (meta) kernels and autograd formulas of the ``kernel_pytorch`` ops.

The fake kernels give output shapes, dtypes and strides without computing,
so ``torch.compile(fullgraph=True)`` and ``torch.export`` trace the ops. The
backward formulas are written with ``torch`` operations (and the ops
themselves where one fits, e.g. the inverse rotation for rope), so they run
on every device the forward runs on. rms_norm, fused_add_rms_norm and
silu_and_mul call backward ops (``rms_norm_backward``,
``silu_and_mul_backward``), which have fused kernels on CUDA.
"""

import math

import torch
from torch.library import register_autograd, register_fake

_ops = torch.ops.kernel_pytorch


# ------------------------------------------------------------------ fakes

@register_fake("kernel_pytorch::rms_norm")
def _rms_norm_fake(x, weight, eps=1e-6):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@register_fake("kernel_pytorch::fused_add_rms_norm")
def _fused_add_rms_norm_fake(x, residual, weight, eps=1e-6):
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(x, memory_format=torch.contiguous_format))


@register_fake("kernel_pytorch::silu")
def _silu_fake(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@register_fake("kernel_pytorch::silu_and_mul")
def _silu_and_mul_fake(x):
    torch._check(x.dim() >= 1 and x.shape[-1] % 2 == 0,
                 lambda: f"kernel_pytorch.ops.silu_and_mul: the last dimension of x must be even, got {x.shape}")
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@register_fake("kernel_pytorch::apply_rope")
def _apply_rope_fake(x, cos, sin, interleaved=False):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@register_fake("kernel_pytorch::softmax")
def _softmax_fake(x, dim=-1):
    if x.dim() == 0:
        return x.new_empty(())
    # The kernel computes along the last dimension of x with `dim` moved there.
    return x.new_empty(x.movedim(dim, -1).shape).movedim(-1, dim)


@register_fake("kernel_pytorch::decode_attention")
def _decode_attention_fake(q, k_cache, v_cache, lengths=None, scale=None):
    return q.new_empty(q.shape)


@register_fake("kernel_pytorch::prefill_attention")
def _prefill_attention_fake(q, k, v, causal=True, scale=None):
    return q.new_empty(q.shape)


@register_fake("kernel_pytorch::matmul_vec")
def _matmul_vec_fake(w, x):
    return w.new_empty((w.shape[0],))


@register_fake("kernel_pytorch::rms_norm_backward")
def _rms_norm_backward_fake(grad, x, weight, eps):
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(weight, memory_format=torch.contiguous_format))


@register_fake("kernel_pytorch::silu_and_mul_backward")
def _silu_and_mul_backward_fake(grad, x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


# --------------------------------------------------------------- autograd

def _rms_norm_grads(grad, s, weight, eps):
    """d/ds and d/dweight of rms_norm(s, weight, eps), computed in float32 (or float64).

    A first-order backward runs the ``rms_norm_backward`` op (a fused kernel on
    CUDA, this formula in ATen ops elsewhere); under ``create_graph=True`` the
    formula runs in differentiable torch ops instead, so double backward works.
    """
    if not torch.is_grad_enabled():
        return _ops.rms_norm_backward(grad, s, weight, eps)
    acc = torch.promote_types(s.dtype, torch.float32)
    sf, gf, wf = s.to(acc), grad.to(acc), weight.to(acc)
    inv = torch.rsqrt(sf.pow(2).mean(-1, keepdim=True) + eps)
    gw = gf * wf
    ds = inv * (gw - sf * inv.pow(2) * (gw * sf).mean(-1, keepdim=True))
    dw = (gf * sf * inv).reshape(-1, s.shape[-1]).sum(0)
    return ds.to(s.dtype), dw.to(weight.dtype)


def _rms_norm_setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_norm_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    dx, dw = _rms_norm_grads(grad, x, weight, ctx.eps)
    return dx, dw, None


register_autograd("kernel_pytorch::rms_norm", _rms_norm_backward, setup_context=_rms_norm_setup)


def _fused_add_rms_norm_setup(ctx, inputs, output):
    _, _, weight, eps = inputs
    ctx.save_for_backward(output[1], weight)
    ctx.eps = eps


def _fused_add_rms_norm_backward(ctx, grad_out, grad_residual):
    s, weight = ctx.saved_tensors
    if grad_out is None:
        grad_out = torch.zeros_like(s)
    ds, dw = _rms_norm_grads(grad_out, s, weight, ctx.eps)
    if grad_residual is not None:
        ds = ds + grad_residual
    return ds, ds, dw, None


register_autograd("kernel_pytorch::fused_add_rms_norm", _fused_add_rms_norm_backward,
                  setup_context=_fused_add_rms_norm_setup)


def _silu_grad(x):
    """d silu(x) / dx = sigmoid(x) * (1 + x * (1 - sigmoid(x)))."""
    acc = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(acc)
    sig = torch.sigmoid(xf)
    return sig * (1 + xf * (1 - sig)), xf * sig


def _save_x(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _silu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    dsilu, _ = _silu_grad(x)
    return (grad.to(dsilu.dtype) * dsilu).to(x.dtype)


register_autograd("kernel_pytorch::silu", _silu_backward, setup_context=_save_x)


def _silu_and_mul_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    if not torch.is_grad_enabled():  # fused kernel on CUDA; see _rms_norm_grads
        return _ops.silu_and_mul_backward(grad, x)
    d = x.shape[-1] // 2
    gate, up = x[..., :d], x[..., d:]
    dsilu, silu_gate = _silu_grad(gate)
    g = grad.to(dsilu.dtype)
    upf = up.to(dsilu.dtype)
    return torch.cat([g * upf * dsilu, g * silu_gate], dim=-1).to(x.dtype)


register_autograd("kernel_pytorch::silu_and_mul", _silu_and_mul_backward, setup_context=_save_x)


def _apply_rope_setup(ctx, inputs, output):
    x, cos, sin, interleaved = inputs
    ctx.interleaved = interleaved
    ctx.save_for_backward(x, cos, sin)


def _rope_pairs(t, interleaved):
    """The two members of each rotated pair: halves, or even and odd elements."""
    if interleaved:
        return t[..., 0::2], t[..., 1::2]
    half = t.shape[-1] // 2
    return t[..., :half], t[..., half:]


def _apply_rope_backward(ctx, grad):
    x, cos, sin = ctx.saved_tensors
    # The rotation is orthogonal: its transpose rotates by -angle.
    dx = _ops.apply_rope(grad.contiguous(), cos, -sin, ctx.interleaved) if ctx.needs_input_grad[0] else None
    dcos = dsin = None
    if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
        acc = torch.promote_types(x.dtype, torch.float32)
        x1, x2 = (t.to(acc) for t in _rope_pairs(x, ctx.interleaved))
        g1, g2 = (t.to(acc) for t in _rope_pairs(grad, ctx.interleaved))
        # out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin; sum over heads (and batch if shared).
        dc = (g1 * x1 + g2 * x2).sum(2)
        ds = (g2 * x1 - g1 * x2).sum(2)
        if cos.dim() == 2:
            dc, ds = dc.sum(0), ds.sum(0)
        dcos, dsin = dc.to(cos.dtype), ds.to(sin.dtype)
    return dx, dcos, dsin, None


register_autograd("kernel_pytorch::apply_rope", _apply_rope_backward, setup_context=_apply_rope_setup)


def _softmax_setup(ctx, inputs, output):
    ctx.dim = inputs[1]
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    acc = torch.promote_types(y.dtype, torch.float32)
    yf, gf = y.to(acc), grad.to(acc)
    dim = ctx.dim if y.dim() > 0 else 0
    if y.dim() == 0:
        return torch.zeros_like(y), None
    return (yf * (gf - (gf * yf).sum(dim, keepdim=True))).to(y.dtype), None


register_autograd("kernel_pytorch::softmax", _softmax_backward, setup_context=_softmax_setup)


def _prefill_attention_setup(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    ctx.causal = causal
    ctx.scale = scale
    ctx.save_for_backward(q, k, v)


def _attention_reference(q, k, v, causal, scale):
    """softmax(q k^T * scale + causal mask) v in plain torch (bottom-right causal mask)."""
    group = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, kk.transpose(-2, -1)) * scale
    if causal:
        tq, tk = q.shape[2], k.shape[2]
        mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, -1), 0.0).matmul(vv)


def _prefill_attention_backward(ctx, grad):
    # Recompute: the forward keeps no T x S matrix, the backward builds it once
    # in the accumulation dtype.
    q, k, v = ctx.saved_tensors
    acc = torch.promote_types(q.dtype, torch.float32)
    with torch.enable_grad():
        qa, ka, va = (t.detach().to(acc).requires_grad_(True) for t in (q, k, v))
        out = _attention_reference(qa, ka, va, ctx.causal, ctx.scale)
        dq, dk, dv = torch.autograd.grad(out, (qa, ka, va), grad.to(acc))
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


register_autograd("kernel_pytorch::prefill_attention", _prefill_attention_backward,
                  setup_context=_prefill_attention_setup)


def _matmul_vec_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_vec_backward(ctx, grad):
    w, x = ctx.saved_tensors
    dw = torch.outer(grad, x) if ctx.needs_input_grad[0] else None
    dx = torch.mv(w.t(), grad) if ctx.needs_input_grad[1] else None
    return dw, dx


register_autograd("kernel_pytorch::matmul_vec", _matmul_vec_backward, setup_context=_matmul_vec_setup)
