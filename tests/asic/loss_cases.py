"""Softmax-family, loss, arg-reduction, var/std and layer-norm cases compared with torch on the CPU.

``SCRIPT`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator with ``MY_ASIC_HOST_ADDRESSABLE=0``, or the OpenCL runtime). It prints one JSON
line: the number of cases checked, the fallback calls of the ops the softmax_dim, nll_loss,
layer_norm and reduce entries serve (kpdr.h's core-op section), and the number of bad calls
that raised ATen's errors.
"""

# The ATen ops routed to those entries off host memory (runtime_losses.cpp, runtime_statistics.cpp).
ROUTED_OPS = (
    "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "native_layer_norm", "native_layer_norm_backward", "argmax", "argmin", "var", "std",
    "var_mean", "std_mean", "sum", "mean", "amax", "amin", "max", "min", "any", "all", "linalg_vector_norm",
    "native_group_norm", "native_group_norm_backward",
)

SCRIPT = r'''
import json, math, torch, kernel_pytorch
import torch.nn.functional as F
torch.manual_seed(0)
dev = "my_asic"
DTYPES = [getattr(torch, name) for name in DTYPE_NAMES]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float16: dict(rtol=4e-3, atol=4e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2), torch.int64: dict(rtol=0, atol=0)}
# The parameter gradients sum 60 rows of products around +-20: a one-ulp difference in the
# saved half-precision mean (float vs double sums) moves them by a few ulps of the terms.
LN_BACKWARD_TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=4e-3, atol=6e-2),
                   torch.bfloat16: dict(rtol=2e-2, atol=0.5)}
checked = 0

def to_dev(v):
    return v.to(dev) if isinstance(v, torch.Tensor) else v

def check(fn, *inputs, name, tol=None, ref_fn=None):
    """fn on device tensors vs fn (or ref_fn) on the CPU tensors (same values, same dtypes)."""
    global checked
    ref = (ref_fn or fn)(*inputs)
    got = fn(*[to_dev(t) for t in inputs])
    refs, gots = (ref, got) if isinstance(ref, (tuple, list)) else ((ref,), (got,))
    for r, g in zip(refs, gots):
        if r is None:
            assert g is None, name
            continue
        assert g.device.type == dev and g.dtype == r.dtype and g.shape == r.shape, (name, g.device, g.dtype, r.dtype, g.shape, r.shape)
        t = tol or TOL[r.dtype]
        torch.testing.assert_close(g.cpu(), r, **t, equal_nan=True, msg=lambda m: f"{name} {r.dtype}: {m}")
    checked += 1
    if DEBUG and torch.my_asic.fallback_stats():
        print(name, torch.my_asic.fallback_stats()); torch.my_asic.reset_fallback_stats()

def grads(fn, *tensors, upstream=None):
    """Gradients of fn(*tensors) (float tensors require grad) for the upstream gradient."""
    leaves = [t.detach().clone().requires_grad_() if t.is_floating_point() else t for t in tensors]
    out = fn(*leaves)
    out.backward(upstream.to(out.device) if upstream is not None else torch.ones_like(out))
    return tuple(t.grad for t in leaves if t.is_floating_point())

torch.my_asic.reset_fallback_stats()
for dt in DTYPES:
    r = lambda *s: torch.randn(*s).to(dt)
    # softmax / log_softmax, any dim, strided inputs, forward and backward
    for name, fn in [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]:
        for dim in (0, 1, -1):
            check(lambda x, d=dim, f=fn: f(x, d), r(6, 7, 9), name=f"{name} dim {dim}")
            check(lambda x, g, d=dim, f=fn: grads(lambda t: f(t, d), x, upstream=g), r(6, 7, 9), r(6, 7, 9),
                  name=f"{name} backward dim {dim}")
        check(lambda x, f=fn: f(x, 1), r(9, 5).t(), name=f"{name} transposed")
        check(lambda x, f=fn: f(x, 0), r(4, 12)[:, ::3], name=f"{name} sliced")
        check(lambda x, f=fn: f(x, -1), r(3, 1000), name=f"{name} long rows")
        check(lambda x, f=fn: f(x, 0), r(11), name=f"{name} 1-d")
        check(lambda x, f=fn: f(x, 0), torch.tensor(2.0).to(dt), name=f"{name} 0-d")
        check(lambda x, f=fn: f(x, 1), r(2, 0, 3), name=f"{name} empty dim")
        check(lambda x, f=fn: f(x, 1), torch.tensor([[1.0, float("-inf"), 2.0], [float("-inf")] * 3]).to(dt),
              name=f"{name} -inf entries and an all -inf row")
    # nll_loss and cross_entropy: weights, ignore_index, reductions, 1-D and 4-D inputs
    C = 7
    x, t = r(10, C), torch.randint(0, C, (10,))
    t_ign = t.clone(); t_ign[::3] = -100
    w = (torch.rand(C) + 0.5).to(dt)
    for reduction in ("mean", "sum", "none"):
        check(lambda x, t, red=reduction: F.nll_loss(x, t, reduction=red), x, t, name=f"nll_loss {reduction}")
        check(lambda x, t, w, red=reduction: F.nll_loss(x, t, weight=w, reduction=red), x, t_ign, w,
              name=f"nll_loss weight ignore_index {reduction}")
        check(lambda x, t, red=reduction: F.nll_loss(x, t, ignore_index=2, reduction=red), x, t, name=f"nll_loss ignore_index=2 {reduction}")
        check(lambda x, t, red=reduction: grads(lambda v: F.nll_loss(v, t, reduction=red).sum(), x), x, t_ign,
              name=f"nll_loss backward {reduction}")
        check(lambda x, t, w, red=reduction: grads(lambda v: F.nll_loss(v, t, weight=w, reduction=red).sum(), x),
              x, t_ign, w, name=f"nll_loss weighted backward {reduction}")
        check(lambda x, t, red=reduction: F.nll_loss(x, t, reduction=red), r(C), torch.tensor(3), name=f"nll_loss 1-d {reduction}")
        check(lambda x, t, red=reduction: F.nll_loss(x, t, reduction=red), r(2, C, 3, 4), torch.randint(0, C, (2, 3, 4)),
              name=f"nll_loss2d {reduction}")
        check(lambda x, t, red=reduction: grads(lambda v: F.nll_loss(v, t, reduction=red).sum(), x), r(2, C, 3, 4),
              torch.randint(0, C, (2, 3, 4)), name=f"nll_loss2d backward {reduction}")
    check(lambda x, t: F.nll_loss(x, t), x, torch.full((10,), -100), name="nll_loss all ignored: NaN")
    check(lambda x, t: F.nll_loss(x, t), x.t().contiguous().t(), t, name="nll_loss column-major input")
    check(lambda x, t: F.nll_loss(x, t), r(2, C, 3, 4).permute(0, 1, 3, 2), torch.randint(0, C, (2, 4, 3)),
          name="nll_loss2d permuted input")
    check(lambda x, t: F.cross_entropy(x, t), x, t, name="cross_entropy")
    check(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), x, t, name="cross_entropy label smoothing")
    check(lambda x, t, w: grads(lambda v: F.cross_entropy(v, t, weight=w, label_smoothing=0.2), x), x, t_ign, w,
          name="cross_entropy weight ignore_index label smoothing backward")
    # argmax / argmin
    x = r(5, 6, 7)
    for name, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
        check(lambda v, f=fn: f(v), x, name=f"{name} all")
        check(lambda v, f=fn: f(v, keepdim=True), x, name=f"{name} all keepdim")
        for dim in (0, 1, -1):
            check(lambda v, d=dim, f=fn: f(v, d), x, name=f"{name} dim {dim}")
        check(lambda v, f=fn: f(v, 1, keepdim=True), x.transpose(0, 2), name=f"{name} transposed keepdim")
        check(lambda v, f=fn: f(v, 1), r(3, 2000), name=f"{name} long rows")
        check(lambda v, f=fn: f(v, 1), torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 2.0, 1.0, 1.0]]).to(dt),
              name=f"{name} NaN and ties: first index")
        check(lambda v, f=fn: f(v, 1), r(0, 3), name=f"{name} empty kept dim")
    # max.dim / min.dim (values and first index), any / all, vector norms
    for name, fn in [("max", torch.max), ("min", torch.min)]:
        check(lambda v, f=fn: f(v, 1), x, name=f"{name}.dim")
        check(lambda v, f=fn: f(v, -1, keepdim=True), x.transpose(0, 2), name=f"{name}.dim transposed keepdim")
        check(lambda v, f=fn: f(v, 1), torch.tensor([[1.0, float("nan"), 3.0], [2.0, 2.0, 1.0]]).to(dt),
              name=f"{name}.dim NaN and ties")
    for name, fn in [("any", torch.any), ("all", torch.all)]:
        check(lambda v, f=fn: f(v > 0), x, name=f"{name} of a mask", tol=TOL[torch.int64])
        check(lambda v, f=fn: f(v > -5, 1), x, name=f"{name}.dim of a mask", tol=TOL[torch.int64])
        check(lambda v, f=fn: f(v.round(), -1, keepdim=True), x, name=f"{name}.dim of floats keepdim", tol=TOL[torch.int64])
        check(lambda v, f=fn: f(v), torch.tensor([0, 3, 0]), name=f"{name} of int64", tol=TOL[torch.int64])
    for ord in (2, 1, float("inf"), -float("inf")):
        check(lambda v, o=ord: torch.linalg.vector_norm(v, o), x, name=f"vector_norm ord {ord}")
        check(lambda v, o=ord: torch.linalg.vector_norm(v, o, dim=(0, 2), keepdim=True), x, name=f"vector_norm ord {ord} dims")
    check(lambda v: grads(lambda a: torch.linalg.vector_norm(a), v), x, name="vector_norm backward")
    check(lambda v: grads(lambda a: a.max(1).values, v), x, name="max.dim backward")
    # var / std / var_mean / std_mean with corrections
    x = r(6, 8, 5)
    for name, fn in [("var", torch.var), ("std", torch.std), ("var_mean", torch.var_mean), ("std_mean", torch.std_mean)]:
        check(lambda v, f=fn: f(v), x, name=f"{name} all")
        check(lambda v, f=fn: f(v, 1), x, name=f"{name} dim")
        check(lambda v, f=fn: f(v, (0, 2), correction=0, keepdim=True), x, name=f"{name} dims correction 0 keepdim")
        check(lambda v, f=fn: f(v, -1, correction=2), x.transpose(1, 2), name=f"{name} transposed correction 2")
    check(lambda v: torch.var(v, 1), r(4, 1), name="var of one element: NaN")
    check(lambda v: torch.var(v, 1, correction=3), r(4, 2), name="var with correction >= count: inf")
    check(lambda v: torch.std(v, 1), r(3, 3000), name="std long rows", tol=dict(rtol=1e-3, atol=1e-3) if dt == torch.float32 else None)
    # layer_norm forward and backward (weight, bias, none, 2-d normalized shape, non-contiguous input)
    x, g = r(6, 10, 16), r(6, 10, 16)
    wt, b = (torch.rand(16) + 0.5).to(dt), r(16)
    check(lambda v, w, bb: F.layer_norm(v, (16,), w, bb), x, wt, b, name="layer_norm")
    check(lambda v: F.layer_norm(v, (10, 16)), x, name="layer_norm 2-d shape, no affine")
    check(lambda v, w: F.layer_norm(v, (16,), w, None, eps=1e-3), x.transpose(0, 1), wt, name="layer_norm transposed input")
    check(lambda v: torch.native_layer_norm(v, (16,), None, None, 1e-5), x, name="native_layer_norm mean and rstd")
    check(lambda v, w, bb, gg: grads(lambda a, c, d: F.layer_norm(a, (16,), c, d), v, w, bb, upstream=gg), x, wt, b, g,
          name="layer_norm backward", tol=LN_BACKWARD_TOL[dt])
    check(lambda v, gg: grads(lambda a: F.layer_norm(a, (10, 16)), v, upstream=gg), x, g, name="layer_norm backward no affine")
    check(lambda v, w: grads(lambda a, c: F.layer_norm(a, (16,), c, None), v, w), r(0, 16), wt, name="layer_norm backward no rows")
    if dt != torch.float32:  # ATen's mixed precision: float32 parameters, float32 mean and rstd
        check(lambda v, w, bb: torch.native_layer_norm(v, (16,), w, bb, 1e-5), x, wt.float(), b.float(),
              name="layer_norm float32 parameters")
        check(lambda v, w, bb, gg: grads(lambda a, c, d: F.layer_norm(a, (16,), c, d), v, w, bb, upstream=gg),
              x, wt.float(), b.float(), g, name="layer_norm float32 parameters backward",
              tol=dict(rtol=2e-2, atol=0.5))
    # group_norm: ATen's composite forward, the backward composed from pointwise ops and reductions
    for shape, groups in (((2, 6, 5, 5), 3), ((3, 4, 7), 2), ((2, 8), 4)):
        c = shape[1]
        check(lambda v, w, bb, gg, n=groups: grads(lambda a, e, f: F.group_norm(a, n, e, f), v, w, bb, upstream=gg),
              r(*shape), r(c), r(c), r(*shape), name=f"group_norm backward {shape}", tol=LN_BACKWARD_TOL[dt])
    check(lambda v, gg: grads(lambda a: F.group_norm(a, 2), v, upstream=gg), r(3, 4, 7).transpose(1, 2).transpose(1, 2),
          r(3, 4, 7), name="group_norm backward no affine", tol=LN_BACKWARD_TOL[dt])
    # sums of masks and integer tensors (int64, exact): cross_entropy's count of kept targets
    check(lambda m: m.sum(), torch.rand(7, 300) > 0.3, name="sum of a bool mask", tol=TOL[torch.int64])
    check(lambda v: v.sum(1, keepdim=True), torch.randint(-2**40, 2**40, (5, 9)), name="sum of int64 (exact)", tol=TOL[torch.int64])
    check(lambda v: v.t().sum(0), torch.randint(-1000, 1000, (6, 4), dtype=torch.int32), name="sum of int32 to int64", tol=TOL[torch.int64])
    # out= forms of the reductions
    for name, fn in [("sum", torch.sum), ("mean", torch.mean), ("amax", torch.amax), ("amin", torch.amin)]:
        check(lambda v, f=fn: f(v, 1, out=torch.empty(0, dtype=v.dtype, device=v.device)), r(4, 9), name=f"{name} out=")

stats = {op: n for op, n in torch.my_asic.fallback_stats().items()
         if op.split("::")[1].split(".")[0] in ROUTED_OPS}
# Bad calls keep ATen's errors (raised by the fallback).
errors = 0
for bad in (lambda: torch.softmax(torch.randn(2, 3, device=dev), 2),
            lambda: F.nll_loss(torch.randn(3, 4, device=dev), torch.zeros(5, dtype=torch.long, device=dev)),
            lambda: F.nll_loss(torch.randn(3, 4, device=dev), torch.zeros(3, dtype=torch.int32, device=dev)),
            lambda: F.layer_norm(torch.randn(3, 4, device=dev), (5,)),
            lambda: torch.argmax(torch.randn(0, 3, device=dev))):
    try:
        bad()
    except (RuntimeError, IndexError, ValueError):
        errors += 1
print(json.dumps({"checked": checked, "fallbacks": stats, "errors": errors}))
'''


def script(dtypes=("float32", "bfloat16"), debug=False):
    """SCRIPT for the given dtype names (debug: print each case's fallbacks)."""
    return f"DTYPE_NAMES = {list(dtypes)!r}\nDEBUG = {debug!r}\nROUTED_OPS = {ROUTED_OPS!r}\n" + SCRIPT
