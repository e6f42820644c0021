"""Scans and compaction (cumsum, cumprod, logcumsumexp, flip, nonzero, masked_select, boolean-mask
indexing and assignment) compared with torch on the CPU.

``script()`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator with MY_ASIC_HOST_ADDRESSABLE=0, or the OpenCL runtime; case_runner.py). It prints one
JSON line: the cases checked, the fallback calls of the ops the scan entry serves
(runtime_scan.cpp, runtime_indexing.cpp), and the errors raised for malformed calls.
:func:`assert_result` is what every runtime's tests expect of it.
"""

from case_runner import case_script

ROUTED_OPS = (
    "cumsum", "cumsum_", "cumprod", "cumprod_", "_logcumsumexp", "logcumsumexp", "flip", "nonzero",
    "masked_select", "masked_scatter", "masked_scatter_", "index", "_index_put_impl_", "masked_fill_", "ne", "where", "add", "item",
    "_local_scalar_dense", "arange", "copy_", "_to_copy", "sum", "mul", "div", "clone",
)

SCRIPT = r'''
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
ALL = FLOATS + [torch.int64, torch.int32, torch.bool]

def values(shape, dt):
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    if dt.is_floating_point:
        return torch.randn(shape).to(dt)
    return torch.randint(-1000, 1000, shape, dtype=dt)

# ---- cumsum / cumprod: every dtype, every dim, non-contiguous, empty, 0-dim ----
for dt in ALL:
    x = values((4, 5, 6), dt)
    for dim in (0, 1, 2, -1):
        check(lambda t, d=dim: torch.cumsum(t, d), x, name=f"cumsum dim {dim} {dt}")
    check(lambda t: torch.cumsum(t.transpose(0, 2), 1), x, name=f"cumsum transposed {dt}")
    check(lambda t: torch.cumsum(t[:, ::2, 1:], 2), x, name=f"cumsum sliced {dt}")
    check(lambda t: torch.cumsum(t, 0), values((0, 3), dt), name=f"cumsum empty {dt}")
    check(lambda t: torch.cumsum(t, 0), values((), dt), name=f"cumsum 0-dim {dt}")
    if dt != torch.bool:
        small = (torch.rand(3, 7) + 0.5).to(dt) if dt.is_floating_point else torch.randint(-3, 4, (3, 7), dtype=dt)
        check(lambda t: torch.cumprod(t, 1), small, name=f"cumprod {dt}")
        check(lambda t: t.clone().cumsum_(1), x, name=f"cumsum_ {dt}")
        check(lambda t: t.clone().cumprod_(0), small, name=f"cumprod_ {dt}")
    check(lambda t: torch.cumsum(t, 1, dtype=torch.float32), x, name=f"cumsum dtype float32 from {dt}")
check(lambda t: torch.cumsum(t, 0, dtype=torch.int64), torch.randn(9) * 50, name="cumsum float to int64")
check(lambda t: torch.cumsum(t, 0), torch.ones(100_003), name="cumsum of a long line (multi-block)",
      tol=dict(rtol=0, atol=0))
check(lambda t: torch.cumsum(t, 1), torch.randn(3, 40_000), name="cumsum long rows", tol=dict(rtol=1e-3, atol=2e-2))
check(lambda t: torch.cumsum(t, 0), torch.randn(700, 3000), name="cumsum down columns (many lines)",
      tol=dict(rtol=1e-3, atol=1e-3))
for dt in FLOATS:
    check(lambda t: torch.logcumsumexp(t, 1), values((3, 50), dt), name=f"logcumsumexp {dt}")
check(lambda t: torch.logcumsumexp(t, 0), torch.tensor([float("-inf"), 0.0, float("-inf"), 3.0, float("inf")]),
      name="logcumsumexp infinities")

# ---- backward: cumsum's is flip, cumsum, flip; logcumsumexp's and cumprod's composed ----
def grad_of(fn):
    def run(x, g):
        x = x.detach().clone().requires_grad_()
        fn(x).backward(g)
        return x.grad
    return run
for dt in (torch.float32, torch.bfloat16):
    check(grad_of(lambda t: torch.cumsum(t, 1)), values((4, 9), dt), values((4, 9), dt), name=f"cumsum backward {dt}")
check(grad_of(lambda t: torch.cumsum(t, 0)), values((6, 3), torch.float32).t(), values((3, 6), torch.float32),
      name="cumsum backward non-contiguous")
check(grad_of(lambda t: torch.cumprod(t, 1)), torch.rand(3, 6) + 0.5, values((3, 6), torch.float32),
      name="cumprod backward (no zeros)")
check(grad_of(lambda t: torch.logcumsumexp(t, 1)), values((3, 6), torch.float32), values((3, 6), torch.float32),
      name="logcumsumexp backward")

# ---- flip ----
for dt in ALL:
    x = values((3, 4, 5), dt)
    check(lambda t: torch.flip(t, [0]), x, name=f"flip 0 {dt}")
    check(lambda t: torch.flip(t, [0, 2]), x, name=f"flip 0 2 {dt}")
    check(lambda t: torch.flip(t.transpose(1, 2), [-1]), x, name=f"flip transposed {dt}")
check(lambda t: torch.flip(t, [0]), torch.randn(0, 3), name="flip empty")

# ---- nonzero / argwhere ----
for dt in ALL:
    x = values((5, 7), dt)
    if dt != torch.bool:
        x = x * (torch.rand(5, 7) > 0.6).to(dt)
    check(torch.nonzero, x, name=f"nonzero {dt}")
    check(torch.nonzero, x.t(), name=f"nonzero transposed {dt}")
    check(lambda t: torch.nonzero(t[:, 1:6:2]), x, name=f"nonzero sliced {dt}")
check(torch.nonzero, torch.rand(3, 1, 4, 2) > 0.3, name="nonzero 4-d")
check(torch.nonzero, torch.zeros(4, 5), name="nonzero none")
check(torch.nonzero, torch.ones(2, 3), name="nonzero all")
check(torch.nonzero, torch.zeros(0, 3), name="nonzero empty")
check(torch.nonzero, torch.tensor(2.0), name="nonzero 0-dim true")
check(torch.nonzero, torch.tensor(0), name="nonzero 0-dim false")
check(torch.nonzero, torch.rand(200_001) > 0.5, name="nonzero of a long mask")
check(lambda t: torch.nonzero(t, as_tuple=True), torch.rand(4, 6) > 0.5, name="nonzero as_tuple")
check(torch.argwhere, torch.randn(4, 4).relu(), name="argwhere")
check(lambda t: torch.tensor([float("nan"), 0.0, -0.0, 1.0]).to(t.device).nonzero(), torch.zeros(1), name="nonzero nan and -0")

# ---- masked_select (and its backward) ----
for dt in ALL:
    x = values((4, 6), dt)
    check(lambda t, m: torch.masked_select(t, m), x, torch.rand(4, 6) > 0.5, name=f"masked_select {dt}")
    check(lambda t, m: torch.masked_select(t, m), x, torch.rand(6) > 0.5, name=f"masked_select broadcast mask {dt}")
    check(lambda t, m: torch.masked_select(t.t(), m), x, torch.rand(6, 4) > 0.5, name=f"masked_select transposed {dt}")
    check(lambda t, m, s: t.masked_scatter(m, s), x, torch.rand(4, 6) > 0.5, values((30,), dt), name=f"masked_scatter {dt}")
    check(lambda t, m, s: t.clone().masked_scatter_(m, s), x, torch.rand(6) > 0.5, values((5, 6), dt),
          name=f"masked_scatter_ broadcast mask {dt}")
check(lambda t, m: torch.masked_select(t, m), torch.randn(1, 5), torch.rand(3, 1) > 0.5, name="masked_select both broadcast")
check(lambda t, m: torch.masked_select(t, m), torch.randn(4), torch.zeros(4, dtype=torch.bool), name="masked_select none")
check(lambda t, m: torch.masked_select(t, m), torch.randn(0, 2), torch.zeros(0, 2, dtype=torch.bool), name="masked_select empty")

# ---- boolean-mask indexing and assignment ----
for dt in ALL:
    x = values((4, 5, 3), dt)
    check(lambda t, m: t[m], x, torch.rand(4, 5, 3) > 0.5, name=f"x[mask] full {dt}")
    check(lambda t, m: t[m], x, torch.rand(4, 5) > 0.5, name=f"x[mask] leading dims {dt}")
    check(lambda t, m: t[:, m], x, torch.rand(5) > 0.5, name=f"x[:, mask] {dt}")
    check(lambda t, m: t[m, 1:], x, torch.rand(4) > 0.5, name=f"x[mask, 1:] {dt}")
    v = True if dt == torch.bool else (7 if not dt.is_floating_point else -2.5)
    def assign(t, m, v=v):
        t = t.clone()
        t[m] = v
        return t
    check(assign, x, torch.rand(4, 5) > 0.5, name=f"x[mask] = scalar {dt}")
    def assign_tensor(t, m):
        t = t.clone()
        t[m] = t[m].flip(0)
        return t
    check(assign_tensor, x, torch.rand(4, 5, 3) > 0.5, name=f"x[mask] = tensor {dt}")
check(lambda t, m: t[m], torch.randn(3, 4), torch.zeros(3, 4, dtype=torch.bool), name="x[mask] selects nothing")
check(lambda t, m: t.index_put((m,), torch.tensor(1.5), accumulate=True), torch.randn(3, 4), torch.rand(3, 4) > 0.5,
      name="index_put accumulate with a mask")
check(grad_of(lambda t: t[t > 0].sum() * 2), torch.randn(5, 4), torch.tensor(1.0), name="x[mask] backward")
check(grad_of(lambda t: torch.masked_select(t, t > 0).sum()), torch.randn(5, 4), torch.tensor(1.0),
      name="masked_select backward")

stats = routed_fallbacks()

# Malformed calls raise ATen's errors (through the fallback); the device stays usable.
w = torch.randn(3, 4, device=dev)
errors = errors_of((lambda: torch.cumsum(w, 2),
                    lambda: w[torch.ones(3, 5, dtype=torch.bool, device=dev)],
                    lambda: torch.masked_select(w, torch.ones(2, 4, dtype=torch.bool, device=dev)),
                    lambda: torch.flip(w, [0, 0]),
                    lambda: w.clone().masked_scatter_(torch.ones(3, 4, dtype=torch.bool, device=dev), torch.ones(5, device=dev))))
assert (w * 2).cpu().shape == (3, 4)
print(json.dumps({"checked": checked, "fallbacks": stats, "errors": errors}))
'''


def script(debug=False):
    """SCRIPT (debug: print each case's fallbacks)."""
    return case_script(SCRIPT, ROUTED_OPS, debug, float32_tol=dict(rtol=1e-4, atol=1e-4),
                       half_tol=dict(rtol=2e-2, atol=5e-2))


def assert_result(result):
    """Every case equals the CPU, no routed op fell back, and each malformed call raised ATen's error."""
    assert result["checked"] >= 200
    assert result["fallbacks"] == {}
    errors = result["errors"]
    assert len(errors) == 5 and "no error" not in errors, errors
    assert errors[0].startswith("IndexError: Dimension out of range")
    assert "The shape of the mask [3, 5] at index 1 does not match" in errors[1]
    assert "must match the size of tensor b" in errors[2]
    assert "dims has duplicates" in errors[3] or "appears multiple times" in errors[3]
    assert "Number of elements of source < number of ones in mask" in errors[4]
