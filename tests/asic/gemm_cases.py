"""GEMM cases (mm, bmm, addmm, baddbmm, linear, matmul) compared with torch on the CPU.

``SCRIPT`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator in either memory mode, or the OpenCL runtime). It prints one JSON line: the
number of cases checked and the fallback calls of the GEMM ops.
"""

SCRIPT = r'''
import json, math, torch, kernel_pytorch
torch.manual_seed(0)
dev = "my_asic"
DTYPES = [getattr(torch, name) for name in DTYPE_NAMES]
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=5e-3, atol=5e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=5e-2)}
checked = 0

def check(fn, *inputs, name):
    """fn on device tensors vs fn on their float32 CPU copies (same rounded values)."""
    global checked
    dtype = next(t.dtype for t in inputs if isinstance(t, torch.Tensor))
    ref = fn(*[t.float() if isinstance(t, torch.Tensor) else t for t in inputs])
    got = fn(*[t.to(dev) if isinstance(t, torch.Tensor) else t for t in inputs])
    assert got.device.type == dev and got.dtype == dtype, (name, got.device, got.dtype)
    torch.testing.assert_close(got.cpu().float(), ref, **TOL[dtype], msg=lambda m: f"{name} {dtype}: {m}")
    checked += 1
    if DEBUG and torch.my_asic.fallback_stats():
        print(name, dtype, torch.my_asic.fallback_stats()); torch.my_asic.reset_fallback_stats()

torch.my_asic.reset_fallback_stats()
for dt in DTYPES:
    r = lambda *s: torch.randn(*s).to(dt)
    m, n, k, b = 17, 33, 65, 3
    check(torch.mm, r(m, k), r(k, n), name="mm")
    check(lambda a, w: a.t() @ w, r(k, m), r(k, n), name="mm op(A)=A^T")
    check(lambda a, w: a @ w.t(), r(m, k), r(n, k), name="mm op(B)=B^T")
    check(lambda a, w: a.t() @ w.t(), r(k, m), r(n, k), name="mm both transposed")
    check(lambda a, w: a[:, 3:3 + k] @ w[::2], r(m, k + 9), r(2 * k, n), name="mm strided rows (ld > cols)")
    check(lambda a, w: a[:, ::2] @ w, r(m, 2 * k), r(k, n), name="mm no unit stride (copied)")
    check(lambda a, w: a.expand(m, k) @ w, r(1, k), r(k, n), name="mm broadcast rows (row stride 0)")
    check(lambda a, w: a @ w.expand(k, n), r(m, k), r(k, 1), name="mm broadcast columns (column stride 0)")
    check(torch.mm, r(1, k), r(k, 1), name="mm 1x1")
    check(torch.mm, r(m, 0), r(0, n), name="mm k=0")
    check(torch.mm, r(0, k), r(k, n), name="mm m=0")
    check(torch.bmm, r(b, m, k), r(b, k, n), name="bmm")
    check(lambda a, w: torch.bmm(a.transpose(1, 2), w.transpose(1, 2)), r(b, k, m), r(b, n, k), name="bmm transposed")
    check(lambda a, w: torch.bmm(a, w.expand(b, k, n)), r(b, m, k), r(1, k, n), name="bmm broadcast B (batch stride 0)")
    check(lambda a, w: torch.bmm(a[::2], w[1::2]), r(2 * b, m, k), r(2 * b, k, n), name="bmm strided batch")
    check(lambda c, a, w: torch.addmm(c, a, w, beta=0.5, alpha=-2.0), r(m, n), r(m, k), r(k, n), name="addmm alpha beta")
    check(lambda c, a, w: torch.addmm(c, a, w), r(n), r(m, k), r(k, n), name="addmm bias broadcast")
    check(lambda c, a, w: torch.addmm(c * math.nan, a, w, beta=0), r(m, n), r(m, k), r(k, n), name="addmm beta=0 ignores NaN")
    check(lambda c, a, w: torch.addmm(c, a, w, beta=3.0), r(m, n), r(m, 0), r(0, n), name="addmm k=0")
    check(lambda c, a, w: c.clone().addmm_(a, w.t(), beta=2.0, alpha=0.25), r(m, n), r(m, k), r(n, k), name="addmm_")
    check(lambda c, a, w: torch.baddbmm(c, a, w, beta=-1.0, alpha=1.5), r(b, m, n), r(b, m, k), r(b, k, n), name="baddbmm")
    check(lambda c, a, w: c.clone().baddbmm_(a, w, alpha=0.5), r(b, m, n), r(b, m, k), r(b, k, n), name="baddbmm_")
    check(lambda a, w: torch.mm(a, w, out=torch.empty(0, dtype=a.dtype, device=a.device)), r(m, k), r(k, n), name="mm out=")
    check(lambda a, w: torch.bmm(a, w, out=torch.empty(b, m, n, dtype=a.dtype, device=a.device)), r(b, m, k), r(b, k, n), name="bmm out=")
    check(lambda c, a, w: torch.addmm(c, a, w, out=torch.empty(m, n, dtype=a.dtype, device=a.device)), r(n), r(m, k), r(k, n), name="addmm out=")
    check(torch.nn.functional.linear, r(b, m, k), r(n, k), r(n), name="linear 3-d")
    check(torch.matmul, r(b, m, k), r(k, n), name="matmul 3-d @ 2-d")
    check(torch.matmul, r(2, b, m, k), r(b, k, n), name="matmul broadcast batch")
    # Autograd: the backward products are mm's on transposed views.
    x, w = r(m, k), r(n, k)
    grads = []
    for device in ("cpu", dev):
        xd = (x.float() if device == "cpu" else x.to(dev)).detach().clone().requires_grad_()
        wd = (w.float() if device == "cpu" else w.to(dev)).detach().clone().requires_grad_()
        torch.nn.functional.linear(xd, wd).pow(2).sum().backward()
        grads.append((xd.grad.cpu().float(), wd.grad.cpu().float()))
    scale = 20 if dt != torch.float32 else 1
    for ref, got in zip(grads[0], grads[1]):
        torch.testing.assert_close(got, ref, rtol=TOL[dt]["rtol"] * scale, atol=TOL[dt]["atol"] * scale * k)
    checked += 1
stats = {op: c for op, c in torch.my_asic.fallback_stats().items() if op.split(".")[0] in
         ("aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::baddbmm", "aten::baddbmm_")}
# Bad shapes keep ATen's error (through the fallback).
try:
    torch.mm(torch.randn(2, 3, device=dev), torch.randn(4, 5, device=dev))
    raise SystemExit("mm of 2x3 and 4x5 did not raise")
except RuntimeError as e:
    assert "cannot be multiplied" in str(e), e
# float64 is not an entry dtype: it falls back and stays correct.
a64, b64 = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 7, dtype=torch.float64)
torch.testing.assert_close((a64.to(dev) @ b64.to(dev)).cpu(), a64 @ b64)
print(json.dumps({"checked": checked, "gemm_fallbacks": stats}))
'''


def script(dtypes=("float32", "bfloat16"), debug=False):
    """SCRIPT for the given dtype names (debug: print each case's fallbacks)."""
    return f"DTYPE_NAMES = {list(dtypes)!r}\nDEBUG = {debug!r}\n" + SCRIPT
