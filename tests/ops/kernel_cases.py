"""Inputs and independent plain-PyTorch references for the kernel_pytorch ops.

The references here are written from the ops' definitions (issue 6), in
float64, with formulations deliberately unlike the package's own reference
code (complex multiplication for rope, explicit index masks for attention),
so that a bug shared by the kernels and the package cannot hide.

A *case* is ``(name, build)`` where ``build(dtype, device)`` returns the
positional arguments of the op. Inputs are generated in float32 on the CPU
from a fixed seed, rounded to ``dtype`` and then moved to ``device``; the
reference is computed from the rounded values, so the only error measured
is the kernel's own.

This module is imported by the in-process tests and by the subprocess
scripts (which put tests/ops on sys.path), so it depends on torch alone.
"""

import math
import os

import torch

# This directory, for subprocess scripts that import this module.
HERE_FOR_SUBPROCESS = os.path.dirname(os.path.abspath(__file__))

OPS = ("rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul", "apply_rope", "softmax",
       "decode_attention", "prefill_attention", "matmul_vec")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# (atol, rtol) per output dtype: float32 allows for a different summation
# order and vectorised exp; 16-bit types allow about two units in the last place.
TOLERANCES = {
    torch.float32: (2e-5, 2e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 2e-3),
    torch.float64: (1e-10, 1e-10),
}


def tolerance(dtype):
    """``dict(atol=..., rtol=...)`` for comparing an output of ``dtype`` with its reference."""
    atol, rtol = TOLERANCES[dtype]
    return {"atol": atol, "rtol": rtol}


# ------------------------------------------------------------- references

def ref_rms_norm(x, weight, eps=1e-6):
    xd = x.double()
    mean_square = (xd * xd).sum(-1, keepdim=True) / max(x.shape[-1], 1)
    return (xd / torch.sqrt(mean_square + eps) * weight.double()).to(x.dtype)


def ref_fused_add_rms_norm(x, residual, weight, eps=1e-6):
    # The sum is rounded to the storage dtype before it is normalised.
    s = (x.double() + residual.double()).to(x.dtype)
    return ref_rms_norm(s, weight, eps), s


def ref_silu(x):
    xd = x.double()
    return (xd / (1 + torch.exp(-xd))).to(x.dtype)


def ref_silu_and_mul(x):
    d = x.shape[-1] // 2
    gate, up = x.double()[..., :d], x.double()[..., d:]
    return (gate / (1 + torch.exp(-gate)) * up).to(x.dtype)


def ref_apply_rope(x, cos, sin, interleaved=False):
    """Rotation of each pair (a, b) by the angle (cos, sin) as the complex product (a + ib)(c + is)."""
    b, s, h, d = x.shape
    xd = x.double()
    if interleaved:
        a, bb = xd[..., 0::2], xd[..., 1::2]
    else:
        a, bb = xd[..., : d // 2], xd[..., d // 2:]
    c, sn = cos.double(), sin.double()
    if c.dim() == 2:  # [seq, d/2], shared by the batch
        c, sn = c.expand(b, s, d // 2), sn.expand(b, s, d // 2)
    rotation = torch.complex(c, sn).unsqueeze(2)  # [b, s, 1, d/2]
    rotated = torch.complex(a, bb) * rotation
    out = torch.empty_like(xd)
    if interleaved:
        out[..., 0::2], out[..., 1::2] = rotated.real, rotated.imag
    else:
        out[..., : d // 2], out[..., d // 2:] = rotated.real, rotated.imag
    return out.to(x.dtype)


def ref_softmax(x, dim=-1):
    xd = x.double()
    e = torch.exp(xd - xd.amax(dim, keepdim=True))
    return (e / e.sum(dim, keepdim=True)).to(x.dtype)


def _attend(q, k, v, visible, scale):
    """q [B, H, Tq, D], k/v [B, Hkv, S, D], visible [B, Tq, S] bool; rows with nothing visible give 0."""
    B, H, Tq, D = q.shape
    Hkv = k.shape[1]
    group = H // Hkv
    out = torch.zeros(B, H, Tq, D, dtype=torch.float64)
    qd, kd, vd = q.double(), k.double(), v.double()
    for h in range(H):
        kv = h // group
        scores = torch.einsum("btd,bsd->bts", qd[:, h], kd[:, kv]) * scale
        scores = scores.masked_fill(~visible, -math.inf)
        top = scores.amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
        weights = torch.exp(scores - top)
        total = weights.sum(-1, keepdim=True)
        weights = torch.where(total > 0, weights / total.clamp_min(1e-300), torch.zeros_like(weights))
        out[:, h] = torch.einsum("bts,bsd->btd", weights, vd[:, kv])
    return out


def ref_decode_attention(q, k_cache, v_cache, lengths=None, scale=None):
    B, H, D = q.shape
    T = k_cache.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    lengths = torch.full((B,), T) if lengths is None else lengths.cpu().long()
    visible = (torch.arange(T).view(1, 1, T) < lengths.view(B, 1, 1)).expand(B, 1, T)
    return _attend(q.unsqueeze(2), k_cache, v_cache, visible, scale).squeeze(2).to(q.dtype)


def ref_prefill_attention(q, k, v, causal=True, scale=None):
    B, H, Tq, D = q.shape
    S = k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    i = torch.arange(Tq).view(Tq, 1)
    j = torch.arange(S).view(1, S)
    # Bottom-right alignment: query i is position i + (S - Tq) of the keys.
    visible = (j <= i + (S - Tq)) if causal else torch.ones(Tq, S, dtype=torch.bool)
    return _attend(q, k, v, visible.expand(B, Tq, S), scale).to(q.dtype)


def ref_matmul_vec(w, x):
    wd, xd = w.double(), x.double()
    return (wd * xd.unsqueeze(0)).sum(1).to(w.dtype)


REFERENCES = {
    "rms_norm": ref_rms_norm,
    "fused_add_rms_norm": ref_fused_add_rms_norm,
    "silu": ref_silu,
    "silu_and_mul": ref_silu_and_mul,
    "apply_rope": ref_apply_rope,
    "softmax": ref_softmax,
    "decode_attention": ref_decode_attention,
    "prefill_attention": ref_prefill_attention,
    "matmul_vec": ref_matmul_vec,
}


# ------------------------------------------------------------------ cases

def _rand(*shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * scale


def _place(dtype, device, *tensors):
    return tuple(t.to(dtype).to(device) if t.is_floating_point() else t.to(device) for t in tensors)


def _angles(*shape, seed):
    theta = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) * 2 * math.pi
    return theta.cos(), theta.sin()


def _rms_cases():
    def contiguous(shape):
        return lambda dt, dev: _place(dt, dev, _rand(*shape, seed=1), _rand(shape[-1], seed=2))

    return [
        ("one_element", contiguous((1, 1))),
        ("width_17", contiguous((3, 17))),
        ("batch_seq_hidden_100", contiguous((2, 5, 100))),
        ("width_512", contiguous((4, 512))),
        ("zero_rows", contiguous((0, 16))),
        ("transposed", lambda dt, dev: (_place(dt, dev, _rand(17, 3, seed=1))[0].t(),
                                        *_place(dt, dev, _rand(17, seed=2)))),
        ("strided_columns", lambda dt, dev: (_place(dt, dev, _rand(5, 34, seed=1))[0][:, ::2],
                                             *_place(dt, dev, _rand(17, seed=2)))),
        ("strided_rows", lambda dt, dev: (_place(dt, dev, _rand(10, 33, seed=1))[0][::2],
                                          _place(dt, dev, _rand(66, seed=2))[0][::2])),
    ]


def _fused_add_cases():
    def contiguous(shape):
        return lambda dt, dev: _place(dt, dev, _rand(*shape, seed=1), _rand(*shape, seed=3), _rand(shape[-1], seed=2))

    return [
        ("one_element", contiguous((1, 1))),
        ("width_17", contiguous((3, 17))),
        ("batch_seq_hidden_100", contiguous((2, 5, 100))),
        ("zero_rows", contiguous((0, 16))),
        ("transposed_residual", lambda dt, dev: (*_place(dt, dev, _rand(3, 17, seed=1)),
                                                 _place(dt, dev, _rand(17, 3, seed=3))[0].t(),
                                                 *_place(dt, dev, _rand(17, seed=2)))),
        ("sliced_x", lambda dt, dev: (_place(dt, dev, _rand(6, 40, seed=1))[0][::2, 3:20],
                                      *_place(dt, dev, _rand(3, 17, seed=3), _rand(17, seed=2)))),
    ]


def _silu_cases():
    def shaped(*shape):
        return lambda dt, dev: _place(dt, dev, _rand(*shape, seed=4, scale=3.0))

    return [
        ("one_element", shaped(1)),
        ("scalar", shaped()),
        ("length_33", shaped(33)),
        ("three_dims", shaped(3, 5, 7)),
        ("length_1000", shaped(1000)),
        ("empty", shaped(0)),
        ("transposed", lambda dt, dev: (_place(dt, dev, _rand(7, 5, seed=4, scale=3.0))[0].t(),)),
    ]


def _silu_and_mul_cases():
    def shaped(*shape):
        return lambda dt, dev: _place(dt, dev, _rand(*shape, seed=5, scale=3.0))

    return [
        ("d_1", shaped(1, 2)),
        ("d_17", shaped(3, 34)),
        ("three_dims_d_19", shaped(2, 3, 38)),
        ("d_300", shaped(4, 600)),
        ("zero_rows", shaped(0, 8)),
        ("sliced_columns", lambda dt, dev: (_place(dt, dev, _rand(3, 50, seed=5, scale=3.0))[0][:, 5:39],)),
        ("transposed", lambda dt, dev: (_place(dt, dev, _rand(34, 3, seed=5, scale=3.0))[0].t(),)),
    ]


def _rope_case(b, s, h, d, per_batch=False, layout="contiguous", interleaved=False):
    def build(dt, dev):
        x = _rand(b, h, s, d, seed=6) if layout == "from_bhsd" else _rand(b, s, h, d, seed=6)
        cs_shape = (b, s, d // 2) if per_batch else (s, d // 2)
        cos, sin = _angles(*cs_shape, seed=7)
        x, cos, sin = _place(dt, dev, x, cos, sin)
        if layout == "from_bhsd":  # [B, H, S, D] viewed as [B, S, H, D]
            x = x.transpose(1, 2)
        if layout == "strided_tables":  # tables sliced out of a larger cache of positions
            cos2, sin2 = _angles(2 * s, d // 2, seed=7) if not per_batch else _angles(b, 2 * s, d // 2, seed=7)
            cos, sin = _place(dt, dev, cos2, sin2)
            cos, sin = (cos[::2], sin[::2]) if not per_batch else (cos[:, ::2], sin[:, ::2])
        return x, cos, sin, interleaved

    return build


def _rope_cases():
    cases = []
    for interleaved, tag in ((False, "halves"), (True, "interleaved")):
        cases += [
            (f"{tag}_head_dim_2", _rope_case(1, 1, 1, 2, interleaved=interleaved)),
            (f"{tag}_seq_5_heads_3_dim_8", _rope_case(2, 5, 3, 8, interleaved=interleaved)),
            (f"{tag}_head_dim_34", _rope_case(1, 7, 4, 34, interleaved=interleaved)),
            (f"{tag}_head_dim_128", _rope_case(2, 3, 2, 128, interleaved=interleaved)),
            (f"{tag}_per_batch_tables", _rope_case(2, 5, 3, 24, per_batch=True, interleaved=interleaved)),
            (f"{tag}_x_transposed_from_bhsd", _rope_case(2, 6, 3, 16, layout="from_bhsd", interleaved=interleaved)),
            (f"{tag}_strided_tables", _rope_case(2, 4, 3, 16, layout="strided_tables", interleaved=interleaved)),
            (f"{tag}_per_batch_strided_tables",
             _rope_case(2, 4, 3, 16, per_batch=True, layout="strided_tables", interleaved=interleaved)),
            (f"{tag}_zero_batch", _rope_case(0, 3, 2, 8, interleaved=interleaved)),
        ]
    return cases


def _softmax_cases():
    def shaped(shape, dim, scale=2.0):
        return lambda dt, dev: (*_place(dt, dev, _rand(*shape, seed=8, scale=scale)), dim)

    return [
        ("one_element", shaped((1, 1), -1)),
        ("width_17", shaped((3, 17), -1)),
        ("width_1000", shaped((2, 1000), -1)),
        ("dim_0", shaped((5, 7), 0)),
        ("middle_dim", shaped((2, 9, 3), 1)),
        ("large_logits", shaped((4, 33), -1, scale=300.0)),
        ("zero_rows", shaped((0, 5), -1)),
        ("transposed", lambda dt, dev: (_place(dt, dev, _rand(17, 3, seed=8))[0].t(), -1)),
    ]


def _decode_case(B, H, Hkv, T, D, lengths=None, scale=None, cache_slack=0, q_transposed=False):
    def build(dt, dev):
        q = _rand(H, B, D, seed=9) if q_transposed else _rand(B, H, D, seed=9)
        k = _rand(B, Hkv, T + cache_slack, D, seed=10)
        v = _rand(B, Hkv, T + cache_slack, D, seed=11)
        q, k, v = _place(dt, dev, q, k, v)
        if q_transposed:  # [H, B, D] viewed as [B, H, D]
            q = q.transpose(0, 1)
        if cache_slack:  # the valid prefix of a larger preallocated cache, as a model keeps it
            k, v = k[:, :, :T], v[:, :, :T]
        lens = None if lengths is None else torch.tensor(lengths, dtype=torch.int64, device=dev)
        return q, k, v, lens, scale

    return build


def _decode_cases():
    return [
        ("cache_length_1", _decode_case(1, 1, 1, 1, 8)),
        ("gqa_8_over_2", _decode_case(2, 8, 2, 7, 16)),
        ("mha", _decode_case(2, 4, 4, 33, 20)),
        ("lengths", _decode_case(3, 4, 2, 33, 16, lengths=[1, 17, 33])),
        ("explicit_scale", _decode_case(1, 2, 1, 9, 8, scale=0.3)),
        ("sliced_cache", _decode_case(2, 8, 2, 12, 16, cache_slack=5)),
        ("transposed_q", _decode_case(2, 4, 2, 10, 16, q_transposed=True)),
        ("head_dim_128", _decode_case(1, 8, 2, 40, 128)),
        # Head sizes that are multiples of 32 take the bfloat16 dot-product path
        # at avx512_bf16: groups of 6 (a tile of 4 rows and one of 2) and 3, a
        # head_dim of 96 (a 64- and a 32-column tile), odd lengths (a key
        # without a partner), blocks of 64 keys and the cache split over
        # threads (chunks of at least 256 keys).
        ("groups_of_6_head_dim_96", _decode_case(2, 12, 2, 301, 96, lengths=[301, 77])),
        ("group_of_3_odd_cache", _decode_case(1, 3, 1, 65, 32)),
        ("mha_long_cache", _decode_case(1, 4, 4, 1000, 64)),
        ("zero_batch", _decode_case(0, 4, 2, 5, 8)),
    ]


def _prefill_case(B, H, Hkv, T, S, D, causal=True, scale=None, layout="contiguous"):
    def build(dt, dev):
        if layout == "from_bthd":  # projections [B, T, H, D] viewed as [B, H, T, D], as models do
            q, k, v = _place(dt, dev, _rand(B, T, H, D, seed=12), _rand(B, S, Hkv, D, seed=13),
                             _rand(B, S, Hkv, D, seed=14))
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        else:
            q, k, v = _place(dt, dev, _rand(B, H, T, D, seed=12), _rand(B, Hkv, S, D, seed=13),
                             _rand(B, Hkv, S, D, seed=14))
        return q, k, v, causal, scale

    return build


def _prefill_cases():
    return [
        ("single_token", _prefill_case(1, 1, 1, 1, 1, 8)),
        ("gqa_causal", _prefill_case(2, 8, 2, 9, 9, 16)),
        ("gqa_non_causal", _prefill_case(2, 8, 2, 9, 9, 16, causal=False)),
        ("mha_causal_33", _prefill_case(1, 2, 2, 33, 33, 24)),
        ("chunk_causal_5_of_12", _prefill_case(1, 4, 2, 5, 12, 8)),
        ("chunk_non_causal_5_of_12", _prefill_case(1, 4, 2, 5, 12, 8, causal=False)),
        ("longer_queries_causal", _prefill_case(1, 2, 1, 7, 4, 8)),
        ("explicit_scale", _prefill_case(1, 2, 1, 6, 6, 8, scale=0.2)),
        ("transposed_from_bthd", _prefill_case(2, 4, 2, 11, 11, 16, layout="from_bthd")),
        ("head_dim_128", _prefill_case(1, 4, 2, 70, 70, 128)),
        # Several softmax steps of 256 keys (bfloat16 prefill), the last partly past the keys.
        ("head_dim_128_causal_600_keys", _prefill_case(1, 4, 2, 300, 600, 128)),
        ("head_dim_64_non_causal_520_keys", _prefill_case(1, 2, 1, 40, 520, 64, causal=False)),
        # Fewer than two vectors of keys and of head size (AVX-512: 16 floats each).
        ("short_keys_head_dim_16", _prefill_case(2, 4, 2, 22, 22, 16, causal=False)),
        ("zero_batch", _prefill_case(0, 2, 1, 3, 3, 8)),
    ]


def _matmul_vec_cases():
    def shaped(n, k):
        return lambda dt, dev: _place(dt, dev, _rand(n, k, seed=15), _rand(k, seed=16))

    return [
        ("one_by_one", shaped(1, 1)),
        ("33_by_47", shaped(33, 47)),
        ("64_by_300", shaped(64, 300)),
        ("zero_rows", shaped(0, 5)),
        ("zero_columns", shaped(5, 0)),
        ("transposed_w", lambda dt, dev: (_place(dt, dev, _rand(47, 33, seed=15))[0].t(),
                                          *_place(dt, dev, _rand(47, seed=16)))),
        ("strided_rows", lambda dt, dev: (_place(dt, dev, _rand(40, 31, seed=15))[0][::3],
                                          *_place(dt, dev, _rand(31, seed=16)))),
        ("strided_x", lambda dt, dev: (*_place(dt, dev, _rand(9, 20, seed=15)),
                                       _place(dt, dev, _rand(40, seed=16))[0][::2])),
    ]


CASES = {
    "rms_norm": _rms_cases(),
    "fused_add_rms_norm": _fused_add_cases(),
    "silu": _silu_cases(),
    "silu_and_mul": _silu_and_mul_cases(),
    "apply_rope": _rope_cases(),
    "softmax": _softmax_cases(),
    "decode_attention": _decode_cases(),
    "prefill_attention": _prefill_cases(),
    "matmul_vec": _matmul_vec_cases(),
}

# Tolerance multipliers for outputs that sum many rounded terms.
_SLACK = {"matmul_vec": 4.0, "decode_attention": 2.0, "prefill_attention": 2.0}


def all_case_ids():
    """``[(op, case_name), ...]`` for every op and case."""
    return [(op, name) for op in OPS for name, _ in CASES[op]]


def build_case(op, name, dtype, device):
    """The op's positional arguments for case ``name``."""
    for case_name, build in CASES[op]:
        if case_name == name:
            return build(dtype, device)
    raise KeyError(f"{op} has no case {name!r}")


def check_case(op, name, dtype, device):
    """Runs ``torch.ops.kernel_pytorch.<op>`` on ``device`` and compares it with the reference.

    Returns None when they agree, else a description of the mismatch.
    """
    args = build_case(op, name, dtype, device)
    actual = getattr(torch.ops.kernel_pytorch, op)(*args)
    host_args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
    expected = REFERENCES[op](*host_args)
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    tol = tolerance(dtype)
    slack = _SLACK.get(op, 1.0)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if a.device.type != torch.device(device).type:
            return f"output {i} is on {a.device}, expected {device}"
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"output {i}: got {a.dtype}{tuple(a.shape)}, expected {e.dtype}{tuple(e.shape)}"
        try:
            torch.testing.assert_close(a.cpu(), e, atol=tol["atol"] * slack, rtol=tol["rtol"] * slack)
        except AssertionError as error:
            return f"output {i}: {error}"
    return None


def check_case_safely(op, name, dtype, device):
    """:func:`check_case`, with an exception reported as the mismatch (for subprocess sweeps)."""
    try:
        return check_case(op, name, dtype, device)
    except Exception as error:  # noqa: BLE001  (the sweep reports every failure)
        return f"raised {type(error).__name__}: {error}"
