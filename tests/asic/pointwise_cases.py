"""Pointwise and reduction cases compared with torch on the CPU.

``SCRIPT`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator in either memory mode, or the OpenCL runtime). It prints one JSON line: the number
of cases checked and the fallback calls of the ops the pointwise/reduce entries serve
(kpdr.h's core-op section), plus the calls it sent to the fallback on purpose.
"""

# The ATen ops routed to the entries off host memory (runtime_pointwise.cpp, runtime_reduce.cpp).
ROUTED_OPS = (
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "neg_", "abs", "abs_",
    "exp", "exp_", "sign", "sign_", "sgn", "sgn_", "log", "log_", "sqrt", "sqrt_", "rsqrt", "rsqrt_", "relu", "relu_", "gelu", "gelu_",
    "gelu_backward", "silu", "silu_", "silu_backward", "sigmoid", "sigmoid_", "sigmoid_backward",
    "tanh", "tanh_", "tanh_backward", "threshold_backward", "pow", "maximum", "minimum",
    "eq", "ne", "lt", "le", "gt", "ge", "where", "fill_", "zero_", "lerp", "lerp_",
    "addcmul", "addcmul_", "addcdiv", "addcdiv_", "sum", "mean", "amax", "amin",
    "mse_loss", "mse_loss_backward", "log1p", "log1p_", "expm1", "expm1_", "clamp", "clamp_", "clamp_min",
    "clamp_min_", "clamp_max", "clamp_max_", "softplus", "softplus_backward", "log_sigmoid_forward",
    "log_sigmoid_backward", "max", "min",
)

SCRIPT = r'''
import json, math, torch, kernel_pytorch
import torch.nn.functional as F
torch.manual_seed(0)
dev = "my_asic"
DTYPES = [getattr(torch, name) for name in DTYPE_NAMES]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.bool: dict(rtol=0, atol=0)}
checked = 0

def to_dev(v):
    return v.to(dev) if isinstance(v, torch.Tensor) else v

def check(fn, *inputs, name, tol=None):
    """fn on device tensors vs fn on the CPU tensors (same values, same dtypes)."""
    global checked
    ref = fn(*inputs)
    got = fn(*[to_dev(t) for t in inputs])
    refs, gots = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    for r, g in zip(refs, gots):
        assert g.device.type == dev and g.dtype == r.dtype and g.shape == r.shape, (name, g.device, g.dtype, r.dtype, g.shape, r.shape)
        t = tol or TOL[r.dtype]
        torch.testing.assert_close(g.cpu(), r, **t, equal_nan=True, msg=lambda m: f"{name} {r.dtype}: {m}")
    checked += 1
    if DEBUG and torch.my_asic.fallback_stats():
        print(name, torch.my_asic.fallback_stats()); torch.my_asic.reset_fallback_stats()

def inplace(method, *args, **kwargs):
    return lambda x, *rest: getattr(x.clone(), method)(*rest, *args, **kwargs)

torch.my_asic.reset_fallback_stats()
for dt in DTYPES:
    r = lambda *s: torch.randn(*s).to(dt)
    pos = lambda *s: (torch.rand(*s) + 0.1).to(dt)
    # unary, contiguous and non-contiguous (transposed, sliced) inputs
    for name, fn in [("neg", torch.neg), ("abs", torch.abs), ("exp", torch.exp), ("relu", torch.relu),
                     ("gelu", F.gelu), ("gelu tanh", lambda x: F.gelu(x, approximate="tanh")),
                     ("silu", F.silu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                     ("pow 2", lambda x: x.pow(2)), ("pow 3", lambda x: x ** 3), ("sign", torch.sign), ("sgn", torch.sgn)]:
        check(fn, r(7, 33), name=name)
        check(fn, r(33, 7).t(), name=name + " transposed")
        check(fn, r(5, 40)[:, 3:37:2], name=name + " sliced")
    for name, fn in [("log", torch.log), ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt),
                     ("pow 0.5", lambda x: x.pow(0.5)), ("pow -1.5", lambda x: x.pow(-1.5))]:
        check(fn, pos(6, 17), name=name)
    check(inplace("relu_"), r(4, 9), name="relu_")
    check(inplace("exp_"), r(4, 9), name="exp_")
    check(inplace("neg_"), r(4, 9)[:, ::3], name="neg_ strided")
    check(lambda x: x.relu(), torch.tensor([float("nan"), -1.0, 2.0]).to(dt), name="relu keeps NaN")
    check(torch.sign, torch.tensor([float("nan"), -0.0, 0.0, -2.0, 3.0]).to(dt), name="sign of NaN and zeros")
    # binary: broadcasting, scalars, alpha, in-place, out=
    a, b = r(4, 1, 9), r(3, 1)
    check(torch.add, a, b, name="add broadcast")
    check(lambda x, y: torch.add(x, y, alpha=-2.5), a, b, name="add alpha")
    check(lambda x, y: torch.sub(x, y, alpha=0.5), a, b, name="sub alpha")
    check(torch.mul, a, b, name="mul broadcast")
    check(torch.div, a, pos(3, 1), name="div broadcast")
    check(lambda x: x * 3.0, a, name="mul Python scalar")
    check(lambda x: 1.0 - x, a, name="rsub Python scalar")
    check(lambda x: x / 7, a, name="div Python int")
    check(lambda x, y: x + y, r(5, 6), r(6, 5).t(), name="add transposed operand")
    check(lambda x, y: x + y, r(2, 3, 4, 5, 6), r(1, 3, 1, 5, 1), name="add 5-d broadcast")
    check(inplace("add_", alpha=2.0), r(4, 9), r(9), name="add_ broadcast")
    check(inplace("mul_"), r(4, 9), r(4, 1), name="mul_ broadcast")
    check(inplace("div_"), r(4, 9), pos(4, 9), name="div_")
    check(inplace("sub_"), r(4, 9), 1.5, name="sub_ scalar")
    check(lambda x, y: torch.mul(x, y, out=torch.empty(0, dtype=x.dtype, device=x.device)), r(4, 9), r(9), name="mul out=")
    check(lambda x, y: torch.add(x, y, out=torch.empty(4, 9, dtype=x.dtype, device=x.device)), r(4, 9), r(4, 9), name="add out=")
    check(torch.maximum, r(5, 7), r(7), name="maximum")
    check(torch.minimum, r(5, 7), r(5, 1), name="minimum")
    for name, fn in [("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le), ("gt", torch.gt), ("ge", torch.ge)]:
        x = r(6, 8); y = x.clone(); y[::2] = r(3, 8)
        check(fn, x, y, name=name)
        check(lambda t, f=fn: f(t, 0.25), x, name=name + " scalar")
        check(lambda t, f=fn: f(t, 0.1), torch.full((4,), 0.1).to(dt), name=name + " scalar rounded to the dtype")
    check(lambda c, x, y: torch.where(c, x, y), r(4, 8) > 0, r(4, 8), r(8), name="where broadcast")
    check(lambda c, x: torch.where(c, x, 0.0), r(4, 8) > 0, r(4, 8), name="where scalar other")
    check(lambda x, y: torch.lerp(x, y, 0.3), r(4, 8), r(4, 8), name="lerp 0.3")
    check(inplace("lerp_", 0.9), r(4, 8), r(4, 8), name="lerp_ 0.9")
    check(lambda x, y, z: torch.addcmul(x, y, z, value=-0.5), r(4, 8), r(4, 8), r(8), name="addcmul")
    check(inplace("addcdiv_", value=0.1), r(4, 8), r(4, 8), pos(4, 8), name="addcdiv_")
    # activation backward (autograd calls them)
    for name, fn, make in [("relu", torch.relu, r), ("gelu", F.gelu, r), ("gelu tanh", lambda x: F.gelu(x, approximate="tanh"), r),
                           ("silu", F.silu, r), ("sigmoid", torch.sigmoid, r), ("tanh", torch.tanh, r), ("abs", torch.abs, r)]:
        x, g = make(6, 10), make(6, 10)
        def grad(x, g, fn=fn):
            x = x.detach().clone().requires_grad_()
            fn(x).backward(g)
            return x.grad
        check(grad, x, g, name=name + " backward")
    # fills
    check(lambda x: x.clone().fill_(2.5), r(3, 5), name="fill_")
    check(lambda x: x.clone().zero_(), r(3, 5), name="zero_")
    check(lambda x: x.clone()[:, 1:4].fill_(-1.0), r(3, 5), name="fill_ strided view")
    check(lambda x: torch.full_like(x, 7.0), r(3, 5), name="full_like")
    # reductions
    x = r(4, 6, 10)
    rtol = dict(rtol=1e-4, atol=1e-4) if dt == torch.float32 else None
    for name, fn in [("sum all", torch.sum), ("sum dim", lambda t: t.sum(1)), ("sum dims keepdim", lambda t: t.sum((0, 2), keepdim=True)),
                     ("sum -1", lambda t: t.sum(-1)), ("mean all", torch.mean), ("mean dim", lambda t: t.mean(0)),
                     ("mean dims", lambda t: t.mean((1, 2))), ("amax", lambda t: t.amax(2)), ("amin", lambda t: t.amin((0, 1))),
                     ("amax all", lambda t: t.amax()), ("sum transposed", lambda t: t.transpose(0, 2).sum(1)),
                     ("sum sliced", lambda t: t[:, ::2, 1:].sum(-1))]:
        check(fn, x, name=name, tol=rtol)
    check(lambda t: t.sum(0, dtype=torch.float32), r(300, 3), name="sum to float32", tol=dict(rtol=1e-4, atol=1e-4))
    check(lambda t: t.sum(), r(1000, 70), name="sum large (work-group tree)", tol=dict(rtol=1e-3, atol=1e-2) if dt == torch.float32 else dict(rtol=2e-2, atol=1.0))
    check(lambda t: t.amax(-1), r(3, 700), name="amax long rows")
    check(lambda t: t.sum(1), r(3, 0, 4), name="sum of empty dim")
    check(lambda t: t.sum(), torch.tensor(3.0).to(dt), name="sum of a 0-dim tensor")
    check(lambda t: t.amax(1), torch.tensor([[1.0, float("nan")], [2.0, 3.0]]).to(dt), name="amax propagates NaN")
    check(lambda p, t: F.mse_loss(p, t), r(8, 5), r(8, 5), name="mse_loss", tol=rtol)
    check(lambda p, t: F.mse_loss(p, t, reduction="sum"), r(8, 5), r(8, 5), name="mse_loss sum", tol=dict(rtol=1e-4, atol=1e-3) if dt == torch.float32 else None)
    def mse_grad(p, t):
        p = p.detach().clone().requires_grad_()
        F.mse_loss(p, t).backward()
        return p.grad
    check(mse_grad, r(8, 5), r(8, 5), name="mse_loss backward")
    # copies between device dtypes (copy_ / .to on the device)
    for other in (torch.float32, torch.bfloat16, torch.float16):
        if other != dt:
            check(lambda t, o=other: t.to(o), r(5, 7), name=f"cast to {other}")
            check(lambda t, o=other: t.t().to(o), r(5, 7), name=f"cast transposed to {other}")
    check(lambda t: t.t().contiguous(), r(5, 7), name="contiguous of a transpose")

# A loop of its own (its own seed), so the cases above keep their inputs.
torch.manual_seed(1)
for dt in DTYPES:
    r = lambda *s: torch.randn(*s).to(dt)
    pos = lambda *s: (torch.rand(*s) + 0.1).to(dt)
    # log1p/expm1, clamp (both bounds, one, NaN), softplus and log-sigmoid with their backward
    def grad_of(fn):
        def run(t):
            t = t.detach().clone().requires_grad_()
            fn(t).sum().backward()
            return t.grad
        return run
    x = r(9, 17) * 4
    x[0, 0] = float("nan")
    check(torch.log1p, pos(9, 17), name="log1p")
    check(torch.expm1, r(9, 17), name="expm1")
    check(lambda t: t.clamp(-0.5, 0.75), x, name="clamp both bounds (NaN stays)")
    check(lambda t: t.clamp(min=0.1), x.t(), name="clamp min only, transposed")
    check(lambda t: t.clamp(max=-1), x, name="clamp max only")
    check(lambda t: t.clamp(2.0, 1.0), x, name="clamp min above max: max")
    check(inplace("clamp_", -1, 1), x, name="clamp_")
    check(lambda t: t.clamp_min(1e-3), x, name="clamp_min")
    check(inplace("clamp_max_", 0.5), x, name="clamp_max_")
    check(grad_of(lambda t: t.clamp(-1, 1)), r(9, 17) * 2, name="clamp backward")
    check(F.softplus, x, name="softplus")
    check(lambda t: F.softplus(t, beta=2.0, threshold=3.0), x, name="softplus beta threshold")
    check(grad_of(lambda t: F.softplus(t, beta=0.5, threshold=4.0)), r(9, 17) * 8, name="softplus backward")
    check(F.logsigmoid, x * 10, name="logsigmoid (wide range)")
    check(grad_of(F.logsigmoid), r(9, 17) * 10, name="logsigmoid backward")
    check(lambda a, b: F.binary_cross_entropy_with_logits(a, b), r(9, 17), torch.rand(9, 17).to(dt),
          name="binary_cross_entropy_with_logits")
    check(grad_of(torch.log1p), pos(9, 17), name="log1p backward")

# Extremes of bool and integer tensors compare exactly (int64 beyond float32's 2^24), and max()/min().
for x in (torch.tensor([[3, -7], [2 ** 40 + 1, 2 ** 40]]), torch.tensor([[1, 9, -4], [4, -2, 0]], dtype=torch.int32),
          torch.tensor([[False, True], [False, False]]), torch.tensor(7)):
    for name, fn in (("max", torch.max), ("min", torch.min), ("amax", lambda t: t.amax(-1) if t.dim() else t.amax()),
                     ("amin keepdim", lambda t: t.amin(0, keepdim=True) if t.dim() else t.amin())):
        check(fn, x, name=f"{name} {x.dtype} {tuple(x.shape)}", tol=dict(rtol=0, atol=0))
for dt in DTYPES:
    check(torch.max, torch.randn(5, 7).to(dt), name=f"max() {dt}")
    check(torch.min, torch.tensor([1.0, float("nan"), -2.0]).to(dt), name=f"min() propagates NaN {dt}")

stats = {op: n for op, n in torch.my_asic.fallback_stats().items()
         if op.split("::")[1].split(".")[0] in ROUTED_OPS}
# Integer arithmetic runs on the entry; integer sums and float64 fall back; all stay correct.
i = torch.arange(12).reshape(3, 4)
torch.testing.assert_close((i.to(dev) + i.to(dev)).cpu(), i + i)
torch.testing.assert_close(i.to(dev).sum(1).cpu(), i.sum(1))
d = torch.randn(3, 4, dtype=torch.float64)
torch.testing.assert_close((d.to(dev) * 2).exp().cpu(), (d * 2).exp())
torch.testing.assert_close(d.to(dev).mean(0).cpu(), d.mean(0))
# sign and sgn share an op code; complex sgn falls back to sgn itself (not to sign, which refuses complex).
z = torch.tensor([3 + 4j, -1j])
torch.testing.assert_close(torch.sgn(z.to(dev)).cpu(), torch.sgn(z))
# Bad calls keep ATen's errors (raised by the fallback or by TensorIterator).
errors = 0
for bad in (lambda: torch.randn(2, 3, device=dev) + torch.randn(4, device=dev),
            lambda: torch.randn(2, 3, device=dev).sum(5),
            lambda: torch.randn(0, 3, device=dev).amax(0),
            lambda: F.gelu(torch.randn(3, device=dev), approximate="bogus")):
    try:
        bad()
    except (RuntimeError, IndexError):
        errors += 1
intended = {op: n for op, n in torch.my_asic.fallback_stats().items()
            if op.split("::")[1].split(".")[0] in ROUTED_OPS and op not in stats}
print(json.dumps({"checked": checked, "fallbacks": stats, "errors": errors, "intended": intended}))
'''


def script(dtypes=("float32", "bfloat16"), debug=False):
    """SCRIPT for the given dtype names (debug: print each case's fallbacks)."""
    return (f"DTYPE_NAMES = {list(dtypes)!r}\nDEBUG = {debug!r}\nROUTED_OPS = {ROUTED_OPS!r}\n" + SCRIPT)
