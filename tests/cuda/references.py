"""Plain-PyTorch references of the kernel_pytorch ops, computed in float64."""

import math

import torch


def rms_norm(x, w, eps):
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def fused_add_rms_norm(x, r, w, eps):
    s = x + r  # rounded to the input dtype, as the op specifies
    return rms_norm(s, w, eps), s


def silu(x):
    return torch.nn.functional.silu(x.double())


def silu_and_mul(x):
    d = x.shape[-1] // 2
    xd = x.double()
    return torch.nn.functional.silu(xd[..., :d]) * xd[..., d:]


def apply_rope(x, cos, sin, interleaved):
    xd = x.double()
    c, s = cos.double().unsqueeze(-2), sin.double().unsqueeze(-2)
    if interleaved:
        x0, x1 = xd[..., 0::2], xd[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], -1).flatten(-2)
    h = xd.shape[-1] // 2
    x1, x2 = xd[..., :h], xd[..., h:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def softmax(x, dim):
    return torch.softmax(x.double(), dim)


def attention(q, k, v, mask, scale):
    """q [B, H, Tq, D], k, v [B, Hkv, S, D], mask broadcastable to [B, H, Tq, S] (True = attend)."""
    group = q.shape[1] // k.shape[1]
    kk, vv = k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    scores = q.double() @ kk.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, -1), 0.0) @ vv


def decode_attention(q, k, v, lengths=None, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = None
    if lengths is not None:
        pos = torch.arange(k.shape[2], device=q.device)
        mask = (pos[None, :] < lengths[:, None].to(q.device)).view(q.shape[0], 1, 1, k.shape[2])
    return attention(q.unsqueeze(2), k, v, mask, scale).squeeze(2)


def prefill_attention(q, k, v, causal=True, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    mask = None
    if causal:
        tq, tk = q.shape[2], k.shape[2]
        mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)
    return attention(q, k, v, mask, scale)


def matmul_vec(w, x):
    return w.double() @ x.double()


# Tolerances against the float64 references: the output is rounded to the
# dtype once (bf16 keeps 8 bits, fp16 11), float32 accumulates rounding.
TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
    torch.bfloat16: dict(atol=1.6e-2, rtol=1.6e-2),
}
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
