"""Indexing, embedding, cat, integer and index-dependent pointwise cases compared with torch on the CPU.

``script()`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator with MY_ASIC_HOST_ADDRESSABLE=0, or the OpenCL runtime; case_runner.py). It prints one
JSON line: the cases checked, the fallback calls of the ops the gather/scatter/pointwise entries
serve (runtime_indexing.cpp, runtime_tensor_ops.cpp, runtime_pointwise.cpp), and the errors
raised for out-of-range indices. :func:`assert_cases` and :func:`assert_errors` are what every
runtime's tests expect of it.
"""

from case_runner import case_script

ROUTED_OPS = (
    "index_select", "index", "_index_put_impl_", "embedding_dense_backward", "masked_fill_", "cat",
    "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_add", "index_add_", "linspace",
    "logical_not", "bitwise_not", "bitwise_not_", "nan_to_num", "tril", "tril_", "triu", "triu_", "arange",
    "cos", "sin", "bitwise_and", "bitwise_or", "bitwise_xor", "add", "add_", "sub", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "where", "fill_", "zero_", "neg", "abs", "copy_", "_to_copy", "isin", "any", "full", "logical_not",
)

SCRIPT = r'''
import torch.nn.functional as F
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
ALL = FLOATS + [torch.int64, torch.int32, torch.bool]

def values(shape, dt):
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    if dt.is_floating_point:
        return torch.randn(shape).to(dt)
    return torch.randint(-(2 ** 40) if dt == torch.int64 else -(2 ** 30), 2 ** 30, shape, dtype=dt)

# ---- integer pointwise: exact, large values ----
for dt in (torch.int64, torch.int32):
    a, b = values((5, 7), dt), values((7,), dt)
    check(torch.add, a, b, name=f"add {dt}")
    check(lambda x, y: torch.add(x, y, alpha=3), a, b, name=f"add alpha {dt}")
    check(torch.sub, a, b, name=f"sub {dt}")
    check(torch.mul, a, b, name=f"mul {dt} (wraps)")
    check(lambda x: x + 1, a, name=f"add Python int {dt}")
    check(lambda x: x.clone().add_(5), a, name=f"add_ {dt}")
    check(torch.maximum, a, b, name=f"maximum {dt}")
    check(torch.minimum, a, b, name=f"minimum {dt}")
    check(torch.neg, a, name=f"neg {dt}")
    check(torch.abs, a, name=f"abs {dt}")
    check(torch.bitwise_not, a, name=f"bitwise_not {dt}")
    check(torch.logical_not, a, name=f"logical_not {dt}")
    for op in (torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge):
        check(op, a, b, name=f"{op.__name__} {dt}")
    check(lambda x: x < 0.5, a, name=f"lt float scalar {dt}")
    check(lambda x: x / 3, a, name=f"true division {dt}")
    check(lambda x: x.clone().fill_(-(2 ** 40) if x.dtype == torch.int64 else -(2 ** 30)), a, name=f"fill_ {dt}")
    check(lambda x: x.clone().zero_(), a, name=f"zero_ {dt}")
    check(lambda x: x.t().contiguous(), a, name=f"contiguous {dt}")
    check(lambda x: x.to(torch.float32), a[:, :3] % 1000, name=f"cast {dt} to float32")
    check(lambda c, x, y: torch.where(c, x, y), a > 0, a, b, name=f"where {dt}")
counter = torch.tensor(0)
check(lambda c: c.clone().add_(1), counter, name="int64 counter add_ (BatchNorm's num_batches_tracked)")
check(lambda x: x.to(torch.int64), torch.randn(4, 5) * 100, name="cast float32 to int64 (toward zero)")
check(lambda x, y: x & y, values((4, 6), torch.bool), values((4, 6), torch.bool), name="bool and")
check(lambda x, y: (x | y, x ^ y, x & 0xFF), values((4, 6), torch.int64), values((6,), torch.int64), name="int64 or, xor, and scalar")
check(lambda x, y: x + y, values((4, 6), torch.bool), values((4, 6), torch.bool), name="bool add")
check(torch.bitwise_not, values((4, 6), torch.bool), name="bitwise_not bool")
check(torch.logical_not, values((4, 6), torch.bool), name="logical_not bool")
check(lambda x: torch.logical_not(x), torch.tensor([0.0, -0.0, 1.5, float("nan")]), name="logical_not float")

# ---- new float codes ----
for dt in FLOATS:
    x = values((6, 9), dt)
    check(torch.cos, x, name=f"cos {dt}")
    check(torch.sin, x[:, ::2], name=f"sin strided {dt}")
    special = torch.tensor([0.5, float("nan"), float("inf"), -float("inf"), -2.0]).to(dt)
    check(torch.nan_to_num, special, name=f"nan_to_num defaults {dt}", exact=True)
    check(lambda t: torch.nan_to_num(t, nan=1.5, posinf=9.0, neginf=-7.0), special, name=f"nan_to_num values {dt}", exact=True)

# ---- index-dependent: tril/triu, arange ----
for dt in ALL:
    m = values((2, 5, 7), dt)
    for k in (-2, 0, 1, 9):
        check(lambda t, k=k: torch.tril(t, k), m, name=f"tril {k} {dt}")
        check(lambda t, k=k: torch.triu(t, k), m, name=f"triu {k} {dt}")
    check(lambda t: t.clone().tril_(), m, name=f"tril_ {dt}")
    check(lambda t: torch.triu(t.transpose(1, 2)), m, name=f"triu transposed {dt}")
for args, kw in (((10,), {}), ((3, 19, 2), {}), ((-5, 5), dict(dtype=torch.int32)), ((0, 1, 0.125), {}),
                 ((2 ** 40, 2 ** 40 + 7), {}), ((0.5, 4.0, 0.5), dict(dtype=torch.float16))):
    ref = torch.arange(*args, **kw)
    got = torch.arange(*args, **kw, device=dev)
    assert got.dtype == ref.dtype and torch.equal(got.cpu(), ref), (args, got.cpu(), ref)
    checked += 1
mask = torch.full((6, 6), float("-inf")).triu(1)
check(lambda t: torch.full_like(t, float("-inf")).triu(1), mask, name="causal mask", exact=True)

# ---- masked_fill_ ----
for dt in ALL:
    x = values((4, 8), dt)
    fill = True if dt == torch.bool else (-7 if not dt.is_floating_point else -1e4)
    check(lambda t, c: t.clone().masked_fill_(c, fill), x, torch.rand(4, 8) > 0.5, name=f"masked_fill_ {dt}")
    check(lambda t, c: t.masked_fill(c, fill), x, torch.rand(8) > 0.5, name=f"masked_fill broadcast mask {dt}")
check(lambda t, c: t.masked_fill(c, torch.tensor(2.5)), values((3, 4), torch.float32), torch.rand(3, 4) > 0.5, name="masked_fill 0-dim value")

# ---- index_select / embedding ----
for dt in ALL:
    w = values((10, 6), dt)
    idx = torch.tensor([3, 0, 9, 3, 3, 7])
    check(lambda t, i: t.index_select(0, i), w, idx, name=f"index_select dim 0 {dt}")
    check(lambda t, i: t.index_select(1, i), w, torch.tensor([5, 0, 5]), name=f"index_select dim 1 {dt}")
    check(lambda t, i: t.t().index_select(0, i), w, torch.tensor([1, 2]), name=f"index_select transposed {dt}")
    check(lambda t, i: t.index_select(0, i), w, torch.tensor([2, 4], dtype=torch.int32), name=f"index_select int32 index {dt}")
    check(lambda t, i: t[i], w, torch.tensor([[1, -1], [0, -10]]), name=f"index negative {dt}")
    check(lambda t, i: t[:, i], w, torch.tensor([5, -6, 2]), name=f"index second dim {dt}")
    check(lambda t, i, j: t[i, j], w, torch.tensor([0, 9, 4]), torch.tensor([[5], [0]]), name=f"index two tensors broadcast {dt}")
for dt in FLOATS:
    emb = values((12, 5), dt)
    ids = torch.tensor([[1, 4, 4, 11], [0, 4, 2, 2]])
    check(lambda w, i: F.embedding(i, w), emb, ids, name=f"embedding {dt}")
    def embedding_grad(w, i, g, pad=None):
        w = w.detach().clone().requires_grad_()
        F.embedding(i, w, padding_idx=pad).backward(g)
        return w.grad
    g = values((2, 4, 5), dt)
    check(embedding_grad, emb, ids, g, name=f"embedding backward, duplicates accumulate {dt}")
    check(lambda w, i, g: embedding_grad(w, i, g, pad=4), emb, ids, g, name=f"embedding backward padding_idx {dt}")
    check(lambda w, i, g: embedding_grad(w, i, g.transpose(0, 1).contiguous().transpose(0, 1)), emb, ids, g,
          name=f"embedding backward non-contiguous grad {dt}")
    def index_grad(x, i, g):
        x = x.detach().clone().requires_grad_()
        x[i].backward(g)
        return x.grad
    check(index_grad, values((7, 3), dt), torch.tensor([1, 1, -1, 1, 6]), values((5, 3), dt),
          name=f"index backward: index_put_ accumulate, duplicates and negatives {dt}")
    check(lambda t, i, v: t.clone().index_put_((i,), v, accumulate=True), values((7, 3), dt),
          torch.tensor([2, 2, 2]), values((3, 3), dt), name=f"index_put_ accumulate {dt}")
    check(lambda t, i, v: t.clone().index_put_((i,), v), values((7, 3), dt), torch.tensor([0, 5, -1]),
          values((3, 3), dt), name=f"index_put_ assign {dt}")
big = values((1000, 16), torch.float32)
many = torch.randint(0, 30, (5000,))
check(lambda w, i, g: embedding_grad(w, i, g), big, many, values((5000, 16), torch.float32),
      name="embedding backward, many duplicates")

# ---- gather / scatter / scatter_add / index_add (and so their backward ops) ----
for dt in ALL:
    x = values((4, 6), dt)
    idx = torch.tensor([[0, 5, 5], [2, 1, 0], [3, 3, 3]])
    check(lambda t, i: torch.gather(t, 1, i), x, idx, name=f"gather dim 1 {dt}")
    check(lambda t, i: torch.gather(t, 0, i), x, idx.clamp(max=3), name=f"gather dim 0 {dt}")
    check(lambda t, i: torch.gather(t.t(), 0, i), x, idx, name=f"gather transposed {dt}")
    perm = torch.tensor([[1, 0, 3], [0, 2, 1]])
    check(lambda t, i, s: t.clone().scatter_(1, i, s), x, perm, values((2, 5), dt), name=f"scatter_ src {dt}")
    check(lambda t, i, s: torch.scatter(t, 0, i, s), x, perm.clamp(max=3), values((3, 3), dt), name=f"scatter src {dt}")
    fill = True if dt == torch.bool else (-3 if not dt.is_floating_point else 2.5)
    check(lambda t, i: t.scatter(1, i, fill), x, perm, name=f"scatter value {dt}")
    check(lambda t, i: t.clone().scatter_(1, i, fill), x, perm, name=f"scatter_ value {dt}")
for dt in FLOATS:
    x = values((5, 4), dt)
    dup = torch.tensor([[0, 0, 4, 0], [4, 4, 1, 0], [2, 2, 2, 2]])
    check(lambda t, i, s: t.scatter_add(0, i, s), x, dup, values((3, 4), dt), name=f"scatter_add duplicates {dt}")
    check(lambda t, i, s: t.clone().scatter_add_(1, i.clamp(max=3), s), x, dup, values((3, 6), dt), name=f"scatter_add_ {dt}")
    check(lambda t, i, s: t.index_add(0, i, s), x, torch.tensor([4, 0, 4]), values((3, 4), dt), name=f"index_add duplicates {dt}")
    check(lambda t, i, s: t.clone().index_add_(1, i, s, alpha=-2), x, torch.tensor([3, 1], dtype=torch.int32),
          values((5, 2), dt), name=f"index_add_ dim 1 alpha int32 index {dt}")
    def gather_grad(t, i, g):
        t = t.detach().clone().requires_grad_()
        torch.gather(t, 1, i).backward(g)
        return t.grad
    check(gather_grad, x, torch.tensor([[0, 3, 3], [1, 1, 1], [2, 0, 3], [0, 0, 0], [3, 2, 1]]), values((5, 3), dt),
          name=f"gather backward: scatter_add {dt}")
    def index_select_grad(t, i, g):
        t = t.detach().clone().requires_grad_()
        t.index_select(1, i).backward(g)
        return t.grad
    check(index_select_grad, x, torch.tensor([3, 3, 0]), values((5, 3), dt), name=f"index_select backward: index_add {dt}")

# ---- linspace ----
for args, dt in (((0.0, 1.0, 11), torch.float32), ((-3, 7.5, 1000), torch.float32), ((2.0, -2.0, 7), torch.bfloat16),
                 ((1.0, 5.0, 1), torch.float32), ((1.0, 5.0, 0), torch.float16), ((0, 100, 513), torch.float16)):
    ref = torch.linspace(*args, dtype=dt)
    got = torch.linspace(*args, dtype=dt, device=dev)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (args, got, ref)
    tol = dict(rtol=1e-6, atol=1e-5) if dt == torch.float32 else dict(rtol=1e-2, atol=1e-1)
    torch.testing.assert_close(got.cpu(), ref, **tol)
    checked += 1

# ---- cat ----
for dt in ALL:
    parts = [values((2, 3), dt), values((4, 3), dt), values((0, 3), dt)]
    check(lambda *t: torch.cat(t), *parts, name=f"cat dim 0 {dt}")
    check(lambda *t: torch.cat(t, dim=1), values((3, 2), dt), values((3, 5), dt).t().contiguous().t(), name=f"cat dim 1 non-contiguous {dt}")
    check(lambda *t: torch.cat(t, dim=-1), values((2, 1, 3), dt), values((2, 1, 1), dt), name=f"cat dim -1 {dt}")
check(lambda a, b: torch.cat([a, b]), values((2, 3), torch.float32), values((1, 3), torch.bfloat16), name="cat promotes")
check(lambda a, b: torch.cat([a, b]), values((2, 3), torch.float32), torch.tensor([]), name="cat legacy empty input")

# ---- isin (eq + any on the device) ----
for elements, tests in ((torch.tensor([[1, 5, 2], [7, 2, 9]]), torch.tensor([2, 9, 11])),
                        (torch.tensor([1.5, float("nan"), 3.0]), torch.tensor([float("nan"), 3.0])),
                        (torch.tensor([1, 2, 3], dtype=torch.int32), torch.tensor([2.0, 3.5])),
                        (torch.tensor([1, 2], dtype=torch.bfloat16), torch.tensor([2.0])),
                        (torch.tensor([], dtype=torch.long), torch.tensor([1])),
                        (torch.tensor([4, 5]), torch.tensor([], dtype=torch.long)),
                        (torch.tensor(5), torch.tensor([5, 6]))):
    for invert in (False, True):
        check(lambda e, t, invert=invert: torch.isin(e, t, invert=invert), elements, tests,
              name=f"isin {elements.dtype} {tuple(elements.shape)} invert={invert}")
    check(lambda e: torch.isin(e, 2), elements, name=f"isin scalar {elements.dtype}")

stats = routed_fallbacks()

# Out-of-range indices: ATen's IndexError naming the index; the device stays usable.
w = torch.randn(5, 3, device=dev)
errors = errors_of((lambda: w.index_select(0, torch.tensor([1, 5], device=dev)),
                    lambda: w.index_select(0, torch.tensor([-1], device=dev)),
                    lambda: F.embedding(torch.tensor([[0, 7]], device=dev), w),
                    lambda: w[torch.tensor([-6], device=dev)],
                    lambda: w.clone().index_put_((torch.tensor([9], device=dev),), torch.ones(3, device=dev), accumulate=True),
                    lambda: torch.gather(w, 1, torch.tensor([[0, 3]], device=dev)),
                    lambda: w.clone().scatter_add_(0, torch.tensor([[5, 0, 0]], device=dev), torch.ones(1, 3, device=dev)),
                    lambda: w.clone().index_add_(0, torch.tensor([8], device=dev), torch.ones(1, 3, device=dev))),
                   kinds=(IndexError,), with_type=False)
assert (w * 2).cpu().shape == (5, 3)
print(json.dumps({"checked": checked, "fallbacks": stats, "errors": errors}))
'''


def script(debug=False):
    """SCRIPT (debug: print each case's fallbacks)."""
    return case_script(SCRIPT, ROUTED_OPS, debug, float32_tol=dict(rtol=1e-5, atol=1e-5),
                       half_tol=dict(rtol=2e-2, atol=2e-2))


def assert_cases(result):
    """Every case equals the CPU and no routed op fell back."""
    assert result["checked"] >= 300
    assert result["fallbacks"] == {}


def assert_errors(errors):
    """Each out-of-range index raised IndexError naming it (and its op where ATen does)."""
    assert len(errors) == 8 and "no error" not in errors, errors
    assert "index 5 is out of bounds for dimension 0 with size 5" in errors[0]
    assert "index -1" in errors[1]
    assert "index 7" in errors[2]
    assert "index -6" in errors[3]
    assert "index 9" in errors[4]
    assert "gather(): index 3 is out of bounds for dimension 1 with size 3" in errors[5]
    assert "scatter_add_(): index 5" in errors[6]
    assert "index_add_(): index 8" in errors[7]
