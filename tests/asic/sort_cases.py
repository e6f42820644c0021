"""Sorting cases (sort, argsort, msort, topk, kthvalue, median, nanmedian and the backward of
sort and topk) compared with torch on the CPU.

``script()`` runs in a fresh process whose my_asic device is configured by the caller (the
simulator with MY_ASIC_HOST_ADDRESSABLE=0, or the OpenCL runtime; case_runner.py). It prints one
JSON line: the cases checked, the fallback calls of the ops the sort entry serves
(runtime_sort.cpp) and of the ops they are composed of, and the errors raised for calls ATen
rejects. :func:`assert_result` is what every runtime's tests expect of it.

Where ATen leaves the choice open (indices of ties for unstable sorts, topk, kthvalue and
median), the indices are checked to select the values (a gather of the input gives them) and
to be distinct; stable sorts must give the CPU's indices exactly.
"""

from case_runner import case_script

ROUTED_OPS = (
    "sort", "topk", "kthvalue", "median", "nanmedian", "argsort", "msort",
    "gather", "scatter", "scatter_", "ne", "sum", "where", "add", "neg", "mul", "gt", "copy_", "_to_copy",
    "fill_", "zero_", "empty_strided",
)

SCRIPT = r'''
def same(a, b):
    """Equal values, NaN equal to NaN, dtype and shape included."""
    a = a.cpu()
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)

def selects(x, dim, values, indices, name):
    """indices pick values out of x along dim, each at most once per slice."""
    x, values, indices = x.cpu(), values.cpu(), indices.cpu()
    if x.dim() == 0:
        assert indices.item() == 0, name
        return
    assert same(x.gather(dim, indices), values), (name, x, values, indices)
    if indices.numel() == 0:
        return
    s = indices.movedim(dim, -1).reshape(-1, indices.shape[dim])
    assert all(len(set(r.tolist())) == len(r) for r in s), (name, indices)

def check_exact(fn, x, name):
    ref, got = fn(x), fn(x.to(dev))
    refs, gots = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    for r, g in zip(refs, gots):
        assert g.device.type == dev, name
        assert same(g, r), (name, g.cpu(), r)
    note(name)

def values(shape, dt, ties=True):
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    if dt.is_floating_point:
        x = torch.randint(-3, 4, shape).float() if ties else torch.randn(shape)
        flat = x.view(-1)
        flat[torch.rand(flat.numel()) < 0.1] = float("nan")
        flat[torch.rand(flat.numel()) < 0.05] = -0.0
        flat[torch.rand(flat.numel()) < 0.03] = float("inf")
        return x.to(dt)
    big = 2 ** 40 if dt == torch.int64 else 2 ** 20
    return torch.randint(-3, 4, shape, dtype=dt) * big

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
ALL = FLOATS + [torch.int64, torch.int32, torch.bool]

# ---- sort, stable: the CPU's values and indices exactly ----
for dt in ALL:
    x = values((4, 9), dt)
    for dim in (-1, 0):
        for desc in (False, True):
            check_exact(lambda t: torch.sort(t, dim=dim, descending=desc, stable=True), x, f"sort stable {dt} {dim} {desc}")
            check_exact(lambda t: torch.argsort(t, dim=dim, descending=desc, stable=True), x, f"argsort stable {dt} {dim} {desc}")
    check_exact(lambda t: torch.msort(t), x, f"msort {dt}")
    check_exact(lambda t: torch.sort(t.t(), dim=1, stable=True), x, f"sort non-contiguous {dt}")
    check_exact(lambda t: torch.sort(t[:, ::2], dim=0, descending=True, stable=True), x, f"sort sliced {dt}")
    check_exact(lambda t: torch.sort(t, stable=True), values((2, 3, 5), dt).permute(2, 0, 1), f"sort 3-d {dt}")
# ---- sort, unstable (the default): the CPU's values, indices that select them ----
for dt in ALL:
    x = values((3, 11), dt)
    for desc in (False, True):
        v, i = torch.sort(x.to(dev), descending=desc)
        assert same(v, torch.sort(x, descending=desc).values), (dt, desc)
        selects(x, 1, v, i, f"sort {dt} {desc}")
        note(f"sort {dt}")
# ---- long slices (beyond a work-group's local tile) ----
for dt in (torch.float32, torch.bfloat16, torch.int64):
    x = values((2, 5000), dt, ties=dt == torch.int64)
    check_exact(lambda t: torch.sort(t, descending=True, stable=True), x, f"sort long {dt}")
    check_exact(lambda t: torch.sort(t.t(), dim=0, stable=True), x, f"sort long dim 0 {dt}")
# ---- empty and 0-dim ----
for shape in ((0, 5), (5, 0), (0,)):
    check_exact(lambda t: torch.sort(t, stable=True), torch.randn(shape), f"sort empty {shape}")
    check_exact(lambda t: torch.topk(t, 0), torch.randn(shape), f"topk empty {shape}")
check_exact(lambda t: torch.sort(t, stable=True), torch.tensor(2.5), "sort 0-dim")
check_exact(lambda t: torch.topk(t, 1), torch.tensor(2.5), "topk 0-dim")
# ---- out= forms ----
x = values((3, 6), torch.float32)
v, i = torch.empty(0, device=dev), torch.empty(0, dtype=torch.long, device=dev)
torch.sort(x.to(dev), dim=0, stable=True, out=(v, i))
assert same(v, torch.sort(x, dim=0, stable=True).values) and same(i, torch.sort(x, dim=0, stable=True).indices)
note("sort out=")
v, i = torch.empty(0, device=dev), torch.empty(0, dtype=torch.long, device=dev)
torch.topk(x.to(dev), 2, out=(v, i))
assert same(v, torch.topk(x, 2).values)
note("topk out=")

# ---- topk: every k, largest and smallest, sorted or not (ATen's CPU topk refuses bool) ----
for dt in ALL[:5]:
    x = values((5, 7), dt)
    for dim in (-1, 0):
        n = x.shape[dim]
        for k in range(n + 1):
            for largest in (True, False):
                for sorted_ in (True, False):
                    v, i = torch.topk(x.to(dev), k, dim=dim, largest=largest, sorted=sorted_)
                    rv, _ = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted_)
                    if not sorted_:  # any order: compare as sets, in order
                        v_s, rv_s = v.cpu().sort(dim=dim).values, rv.sort(dim=dim).values
                        assert same(v_s, rv_s), (dt, dim, k, largest)
                    else:
                        assert same(v, rv), (dt, dim, k, largest, v.cpu(), rv)
                    selects(x, dim, v, i, f"topk {dt}")
                    note(f"topk {dt} {dim} {k} {largest} {sorted_}")
# vocabulary-sized top-k (a sampler's), non-contiguous
x = torch.randn(3, 32000)
for k in (1, 50):
    v, i = torch.topk(x.to(dev), k)
    assert same(v, torch.topk(x, k).values)
    selects(x, 1, v, i, "topk vocab")
    note("topk vocab")
v, i = torch.topk(x.t().contiguous().to(dev), 5, dim=0)
assert same(v, torch.topk(x.t().contiguous(), 5, dim=0).values)
note("topk vocab dim 0")

# ---- kthvalue, median, nanmedian ----
for dt in ALL[:5]:
    x = values((4, 7), dt)
    for dim in (-1, 0):
        for keepdim in (False, True):
            for k in range(1, x.shape[dim] + 1):
                v, i = torch.kthvalue(x.to(dev), k, dim=dim, keepdim=keepdim)
                rv, _ = torch.kthvalue(x, k, dim=dim, keepdim=keepdim)
                assert same(v, rv), (dt, dim, k, keepdim)
                selects(x, dim, v if keepdim else v.unsqueeze(dim), i if keepdim else i.unsqueeze(dim), "kthvalue")
                note("kthvalue")
            for fn in (torch.median, torch.nanmedian):
                v, i = fn(x.to(dev), dim=dim, keepdim=keepdim)
                rv, ri = fn(x, dim=dim, keepdim=keepdim)
                assert same(v, rv), (fn, dt, dim, keepdim, v.cpu(), rv)
                selects(x, dim, v if keepdim else v.unsqueeze(dim), i if keepdim else i.unsqueeze(dim), "median")
                note(f"{fn.__name__} {dt}")
    for fn in (torch.median, torch.nanmedian):
        check_exact(fn, x, f"{fn.__name__} all {dt}")
# a NaN in every slice, an all-NaN slice, an even length
x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [float("nan")] * 4, [4.0, 2.0, 3.0, 1.0]])
check_exact(lambda t: torch.median(t, dim=1), x, "median nan rows")  # the first NaN's index, as ATen
v, i = torch.nanmedian(x.to(dev), dim=1)  # an all-NaN row: any of its indices
assert same(v, torch.nanmedian(x, dim=1).values)
selects(x, 1, v.unsqueeze(1), i.unsqueeze(1), "nanmedian nan rows")
note("nanmedian nan rows")

# ---- backward: sort and topk scatter the gradient back (distinct values) ----
for dt in FLOATS:
    x = torch.randn(4, 9).to(dt)
    w = torch.randn(4, 9).to(dt)
    grads = []
    for device in ("cpu", dev):
        xd = x.to(device).detach().requires_grad_()
        (torch.sort(xd, dim=1, descending=True).values * w.to(device)).sum().backward()
        s = xd.grad.cpu()
        xd = x.to(device).detach().requires_grad_()
        (torch.topk(xd, 3, dim=0).values * w[:3].to(device)).sum().backward()
        grads.append((s, xd.grad.cpu()))
    assert same(grads[0][0], grads[1][0]) and same(grads[0][1], grads[1][1]), dt
    note(f"backward {dt}")

stats = routed_fallbacks()
# Calls ATen rejects go to the fallback, which raises ATen's errors; the device stays usable.
x = torch.randn(3, 7, device=dev)
errors = errors_of((lambda: torch.sort(x, dim=2), lambda: torch.topk(x, 8), lambda: torch.topk(x > 0, 2),
                    lambda: torch.kthvalue(x, 0), lambda: torch.median(x > 0, 1)))
assert torch.sort(x).values.cpu().shape == (3, 7)
print(json.dumps({"checked": checked, "fallbacks": stats, "errors": errors}))
'''


def script(debug=False):
    """SCRIPT (debug: print each case's fallbacks); its cases compare exactly (no tolerances)."""
    return case_script(SCRIPT, ROUTED_OPS, debug)


def assert_result(result):
    """Every case equals the CPU, no routed op fell back, and each rejected call raised ATen's error."""
    assert result["checked"] >= 500
    assert result["fallbacks"] == {}
    errors = result["errors"]
    assert errors[0].startswith("IndexError: Dimension out of range"), errors
    assert "selected index k out of range" in errors[1], errors
    assert "bool" in errors[2].lower() and "kthvalue" in errors[3] and "Bool" in errors[4], errors
