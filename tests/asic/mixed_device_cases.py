"""Calls that mix a device tensor with CPU tensors, and what CUDA does with each.

Each case is ``(name, call, expected)``: ``call(dev)`` builds its tensors on
``dev`` (a device string such as "cuda" or "my_asic") and on the CPU and makes
one call; ``expected`` is "ok" when the call succeeds on CUDA with its tensor
results on the device, "ok-cpu" when it succeeds with results on the CPU, and
"raise" when CUDA raises RuntimeError. ATen's rule (check_and_update_common_device in the
generated CUDA wrappers, TensorIterator for ops marked ``device_check:
NoCheck``): the tensors of one op share a device, except 0-dim CPU tensors
where TensorIterator takes them as scalars, and the indices of ops whose CUDA
kernels move them (index, index_put_, tensor_split's CPU indices tensor,
copies). The expectations were checked on CUDA (torch 2.11, H100) with
``python tests/asic/mixed_device_cases.py cuda``.

The module imports nothing of kernel_pytorch, so the same table runs on CUDA.
"""

import sys

import torch
import torch.nn.functional as F


def _cpu(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype)


def _linear_on(dev, x):
    torch.manual_seed(0)
    return torch.nn.Linear(4, 4).to(dev)(x)


def _index_put_cpu_indices(dev, accumulate):
    x = torch.zeros(4, 4, device=dev)
    return x.index_put_((torch.tensor([0, 2]),), torch.ones(2, 4, device=dev), accumulate=accumulate)


def _setitem(dev, index, value):
    x = torch.zeros(4, 4, device=dev)
    x[index] = value
    return x


# (name, call(dev), expected on CUDA)
CASES = [
    # The list.
    ("dot(dev, cpu)", lambda d: torch.dot(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("dot(cpu, dev)", lambda d: torch.dot(_cpu(4), torch.ones(4, device=d)), "raise"),
    ("index_add_(cpu index)",
     lambda d: torch.zeros(4, 4, device=d).index_add_(0, torch.tensor([0, 1]), torch.ones(2, 4, device=d)), "raise"),
    ("index_add_(cpu source)",
     lambda d: torch.zeros(4, 4, device=d).index_add_(0, torch.tensor([0, 1], device=d), _cpu(2, 4)), "raise"),
    ("logaddexp(dev, cpu)", lambda d: torch.logaddexp(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("add(dev, cpu)", lambda d: torch.ones(4, device=d) + _cpu(4), "raise"),
    ("add(cpu, dev)", lambda d: _cpu(4) + torch.ones(4, device=d), "raise"),
    ("add_(dev, cpu)", lambda d: torch.ones(4, device=d).add_(_cpu(4)), "raise"),
    ("add_(cpu, dev)", lambda d: _cpu(4).add_(torch.ones(4, device=d)), "raise"),
    ("matmul(dev, cpu)", lambda d: torch.ones(4, 4, device=d) @ _cpu(4, 4), "raise"),
    ("matmul(cpu, dev)", lambda d: _cpu(4, 4) @ torch.ones(4, 4, device=d), "raise"),
    ("Linear on dev, cpu input", lambda d: _linear_on(d, _cpu(2, 4)), "raise"),
    ("Linear on cpu, dev input", lambda d: _linear_on("cpu", torch.ones(2, 4, device=d)), "raise"),
    ("cat([cpu, dev])", lambda d: torch.cat([_cpu(2), torch.ones(4, device=d)]), "raise"),
    ("cat([dev, cpu])", lambda d: torch.cat([torch.ones(4, device=d), _cpu(2)]), "raise"),
    ("where(dev, cpu, cpu)", lambda d: torch.where(torch.ones(4, device=d) > 0, _cpu(4), _cpu(4)), "raise"),
    ("where(cpu, dev, dev)",
     lambda d: torch.where(_cpu(4) > 0, torch.ones(4, device=d), torch.ones(4, device=d)), "raise"),
    # More of the same rule: every tensor on one device.
    ("mul(dev, cpu)", lambda d: torch.ones(4, device=d) * _cpu(4), "raise"),
    ("sub(dev, cpu) broadcast", lambda d: torch.ones(4, 4, device=d) - _cpu(4), "raise"),
    ("mm(dev, cpu)", lambda d: torch.mm(torch.ones(4, 4, device=d), _cpu(4, 4)), "raise"),
    ("bmm(dev, cpu)", lambda d: torch.bmm(torch.ones(2, 4, 4, device=d), _cpu(2, 4, 4)), "raise"),
    ("addmm(cpu bias, dev, dev)",
     lambda d: torch.addmm(_cpu(4), torch.ones(4, 4, device=d), torch.ones(4, 4, device=d)), "raise"),
    ("mv(dev, cpu)", lambda d: torch.mv(torch.ones(4, 4, device=d), _cpu(4)), "raise"),
    ("outer(dev, cpu)", lambda d: torch.outer(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("kron(dev, cpu)", lambda d: torch.kron(torch.ones(2, device=d), _cpu(2)), "raise"),
    ("einsum(dev, cpu)", lambda d: torch.einsum("i,i->", torch.ones(4, device=d), _cpu(4)), "raise"),
    ("stack([dev, cpu])", lambda d: torch.stack([torch.ones(4, device=d), _cpu(4)]), "raise"),
    ("atan2(dev, cpu)", lambda d: torch.atan2(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("maximum(dev, cpu)", lambda d: torch.maximum(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("addcmul(dev, cpu, dev)",
     lambda d: torch.addcmul(torch.ones(4, device=d), _cpu(4), torch.ones(4, device=d)), "raise"),
    ("clamp(dev, min=cpu tensor)", lambda d: torch.clamp(torch.ones(4, device=d), min=_cpu(4)), "raise"),
    ("eq(dev, cpu)", lambda d: torch.eq(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("allclose(dev, cpu)", lambda d: torch.allclose(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("index_select(dev, cpu index)",
     lambda d: torch.index_select(torch.ones(4, 4, device=d), 0, torch.tensor([0, 1])), "raise"),
    ("gather(dev, cpu index)",
     lambda d: torch.gather(torch.ones(4, 4, device=d), 0, torch.zeros(2, 4, dtype=torch.long)), "raise"),
    ("scatter_(dev, cpu index, dev src)",
     lambda d: torch.zeros(4, 4, device=d).scatter_(0, torch.zeros(1, 4, dtype=torch.long),
                                                     torch.ones(1, 4, device=d)), "raise"),
    ("scatter_add(dev, dev index, cpu src)",
     lambda d: torch.zeros(4, 4, device=d).scatter_add(0, torch.zeros(1, 4, dtype=torch.long, device=d),
                                                        _cpu(1, 4)), "raise"),
    ("index_copy_(dev, cpu index)",
     lambda d: torch.zeros(4, 4, device=d).index_copy_(0, torch.tensor([0, 1]), torch.ones(2, 4, device=d)),
     "raise"),
    ("take(dev, cpu index)", lambda d: torch.take(torch.ones(4, device=d), torch.tensor([0, 1])), "raise"),
    ("masked_fill_(dev, cpu mask)",
     lambda d: torch.ones(4, device=d).masked_fill_(torch.tensor([True, False, True, False]), 0.0), "raise"),
    ("masked_select(dev, cpu mask)",
     lambda d: torch.masked_select(torch.ones(4, device=d), torch.tensor([True, False, True, False])), "raise"),
    ("masked_scatter_(dev, cpu mask)",
     lambda d: torch.ones(4, device=d).masked_scatter_(torch.tensor([True, False, True, False]),
                                                        torch.zeros(4, device=d)), "raise"),
    ("searchsorted(dev, cpu)", lambda d: torch.searchsorted(torch.arange(4.0, device=d), _cpu(2)), "raise"),
    ("bucketize(dev, cpu boundaries)",
     lambda d: torch.bucketize(torch.ones(4, device=d), torch.arange(4.0)), "raise"),
    ("embedding(cpu indices, dev weight)",
     lambda d: F.embedding(torch.tensor([0, 1]), torch.ones(4, 3, device=d)), "raise"),
    ("cross_entropy(dev, cpu target)",
     lambda d: F.cross_entropy(torch.ones(2, 3, device=d), torch.tensor([0, 1])), "raise"),
    ("mse_loss(dev, cpu)", lambda d: F.mse_loss(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("conv2d(dev, cpu weight)",
     lambda d: F.conv2d(torch.ones(1, 1, 4, 4, device=d), _cpu(1, 1, 3, 3)), "raise"),
    ("layer_norm(dev, cpu weight)",
     lambda d: F.layer_norm(torch.ones(2, 4, device=d), (4,), weight=_cpu(4)), "raise"),
    ("rms_norm(dev, cpu weight)", lambda d: F.rms_norm(torch.ones(2, 4, device=d), (4,), weight=_cpu(4)), "raise"),
    ("batch_norm(dev, cpu running stats)",
     lambda d: F.batch_norm(torch.ones(2, 4, device=d), _cpu(4), _cpu(4), training=False), "raise"),
    ("scaled_dot_product_attention(dev q, cpu k v)",
     lambda d: F.scaled_dot_product_attention(torch.ones(1, 1, 2, 4, device=d), _cpu(1, 1, 2, 4), _cpu(1, 1, 2, 4)),
     "raise"),
    ("cdist(dev, cpu)", lambda d: torch.cdist(torch.ones(2, 4, device=d), _cpu(2, 4)), "raise"),
    ("polar(dev, cpu)", lambda d: torch.polar(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("complex(dev, cpu)", lambda d: torch.complex(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("bincount(dev, cpu weights)",
     lambda d: torch.bincount(torch.tensor([0, 1], device=d), weights=_cpu(2)), "raise"),
    ("lerp(dev, cpu end)", lambda d: torch.lerp(torch.ones(4, device=d), _cpu(4), 0.5), "raise"),
    ("dev[cpu indices] = cpu values",
     lambda d: _setitem(d, torch.tensor([0, 2]), _cpu(2, 4)), "raise"),
    ("index_put_(dev, cpu indices, cpu values)",
     lambda d: torch.zeros(4, 4, device=d).index_put_((torch.tensor([0, 2]),), _cpu(2, 4)), "raise"),
    # 0-dim CPU tensors are scalars for TensorIterator ops.
    ("add(dev, cpu 0-dim)", lambda d: torch.ones(4, device=d) + torch.tensor(2.0), "ok"),
    ("add(cpu 0-dim, dev)", lambda d: torch.tensor(2.0) + torch.ones(4, device=d), "ok"),
    ("mul_(dev, cpu 0-dim)", lambda d: torch.ones(4, device=d).mul_(torch.tensor(3.0)), "ok"),
    ("div(dev, cpu 0-dim int)", lambda d: torch.ones(4, device=d) / torch.tensor(2), "ok"),
    ("pow(dev, cpu 0-dim)", lambda d: torch.pow(torch.ones(4, device=d), torch.tensor(2.0)), "ok"),
    ("where(dev, cpu 0-dim, dev)",
     lambda d: torch.where(torch.ones(4, device=d) > 0, torch.tensor(0.0), torch.ones(4, device=d)), "ok"),
    ("lerp(dev, dev, cpu 0-dim weight)",
     lambda d: torch.lerp(torch.ones(4, device=d), torch.zeros(4, device=d), torch.tensor(0.5)), "ok"),
    ("addcmul(dev, dev, cpu 0-dim)",
     lambda d: torch.addcmul(torch.ones(4, device=d), torch.ones(4, device=d), torch.tensor(2.0)), "ok"),
    ("masked_fill_(dev, dev mask, cpu 0-dim value)",
     lambda d: torch.ones(4, device=d).masked_fill_(torch.ones(4, device=d) > 0, torch.tensor(0.0)), "ok"),
    ("fill_(dev, cpu 0-dim)", lambda d: torch.ones(4, device=d).fill_(torch.tensor(2.0)), "ok"),
    ("eq(dev, cpu 0-dim)", lambda d: torch.ones(4, device=d) == torch.tensor(1.0), "ok"),
    ("sum(dev) + cpu 0-dim", lambda d: torch.ones(4, device=d).sum() + torch.tensor(1.0), "ok"),
    # ...but not for ops whose CUDA wrapper checks every tensor (device_check: ExactSame).
    ("addmm(cpu 0-dim bias, dev, dev)",
     lambda d: torch.addmm(torch.tensor(1.0), torch.ones(4, 4, device=d), torch.ones(4, 4, device=d)), "raise"),
    ("index_select(dev, cpu 0-dim index)",
     lambda d: torch.index_select(torch.ones(4, 4, device=d), 0, torch.tensor(1)), "raise"),
    ("nll_loss(dev, cpu 0-dim target)",
     lambda d: F.nll_loss(torch.ones(3, device=d), torch.tensor(1)), "raise"),
    ("clamp(dev, min=cpu 0-dim)", lambda d: torch.clamp(torch.ones(4, device=d), min=torch.tensor(0.5)), "raise"),
    ("normal(dev mean, cpu 0-dim std)", lambda d: torch.normal(torch.ones(4, device=d), torch.tensor(1.0)), "raise"),
    ("equal(dev, cpu)", lambda d: torch.equal(torch.ones(4, device=d), _cpu(4)), "raise"),
    ("linalg.solve(dev, cpu)", lambda d: torch.linalg.solve(torch.eye(2, device=d), _cpu(2)), "raise"),
    ("prelu(dev, cpu weight)", lambda d: F.prelu(torch.ones(2, 4, device=d), _cpu(1)), "raise"),
    ("repeat_interleave(dev, cpu repeats)",
     lambda d: torch.repeat_interleave(torch.ones(2, device=d), torch.tensor([1, 2])), "raise"),
    ("embedding_bag(dev, cpu offsets)",
     lambda d: F.embedding_bag(torch.tensor([0, 1], device=d), torch.ones(4, 3, device=d), torch.tensor([0])), "raise"),
    # ...nor for the inputs some TensorIterator kernels refuse as CPU scalars.
    ("index_fill_(dev, cpu 0-dim index)",
     lambda d: torch.zeros(4, device=d).index_fill_(0, torch.tensor(1), 1.0), "raise"),
    ("masked_fill_(dev, cpu 0-dim mask)",
     lambda d: torch.ones(4, device=d).masked_fill_(torch.tensor(True), 0.0), "raise"),
    ("binary_cross_entropy(dev, cpu 0-dim target)",
     lambda d: F.binary_cross_entropy(torch.tensor(0.5, device=d), torch.tensor(1.0)), "raise"),
    ("addcdiv_(dev, cpu 0-dim tensor1, dev)",
     lambda d: torch.ones(4, device=d).addcdiv_(torch.tensor(1.0), torch.ones(4, device=d)), "raise"),
    ("add(cpu, dev 0-dim)", lambda d: _cpu(4) + torch.tensor(1.0, device=d), "raise"),
    ("mul(dev, cpu 1-element 1-dim)", lambda d: torch.ones(4, device=d) * _cpu(1), "raise"),
    ("set_(dev, cpu)", lambda d: torch.zeros(4, device=d).set_(_cpu(4)), "raise"),
    ("tensor_split(dev, dev indices tensor)",
     lambda d: torch.tensor_split(torch.arange(8.0, device=d), torch.tensor([2, 5], device=d)), "raise"),
    ("cpu[dev indices]", lambda d: _cpu(4)[torch.tensor([0, 1], device=d)], "raise"),
    ("index_put_(dev, cpu indices, cpu 1-element value)",
     lambda d: torch.zeros(4, device=d).index_put_((torch.tensor([0, 1]),), _cpu(1)), "raise"),
    ("_foreach_add_([dev], [cpu])", lambda d: torch._foreach_add_([torch.zeros(4, device=d)], [_cpu(4)]), "raise"),
    ("index_fill_(dev, cpu index)",
     lambda d: torch.zeros(4, 4, device=d).index_fill_(0, torch.tensor([0, 1]), 1.0), "raise"),
    ("where(cpu 0-dim, dev, dev)",
     lambda d: torch.where(torch.tensor(True), torch.ones(4, device=d), torch.ones(4, device=d)), "ok"),
    ("add(dev 0-dim, cpu 0-dim)", lambda d: torch.tensor(1.0, device=d) + torch.tensor(1.0), "ok"),
    ("dist(dev, cpu 0-dim)", lambda d: torch.dist(torch.ones(4, device=d), torch.tensor(1.0)), "ok"),
    ("index_fill_(dev, dev index, cpu 0-dim value)",
     lambda d: torch.zeros(4, device=d).index_fill_(0, torch.tensor([1], device=d), torch.tensor(1.0)), "ok"),
    ("_foreach_mul_([dev], cpu 0-dim)", lambda d: torch._foreach_mul_([torch.ones(4, device=d)], torch.tensor(2.0)),
     "ok"),
    ("_foreach_add([dev, cpu], 1)", lambda d: torch._foreach_add([torch.zeros(4, device=d), _cpu(4)], 1), "ok"),
    # Indices that CUDA kernels take from the CPU.
    ("index_put_(dev, cpu indices)", lambda d: _index_put_cpu_indices(d, False), "ok"),
    ("index_put_(dev, cpu indices, accumulate)", lambda d: _index_put_cpu_indices(d, True), "ok"),
    ("index_put_(dev, cpu indices, cpu 0-dim value)",
     lambda d: torch.zeros(4, 4, device=d).index_put_((torch.tensor([0, 2]),), torch.tensor(1.0)), "ok"),
    ("dev[cpu indices] = dev values", lambda d: _setitem(d, torch.tensor([0, 2]), torch.ones(2, 4, device=d)), "ok"),
    ("dev[cpu bool mask] = 1", lambda d: _setitem(d, torch.tensor([True, False, True, False]), 1.0), "ok"),
    ("bernoulli_(dev, cpu p)", lambda d: torch.zeros(4, device=d).bernoulli_(torch.full((4,), 0.5)), "ok"),
    ("dev[cpu indices]", lambda d: torch.ones(4, 4, device=d)[torch.tensor([0, 2])], "ok"),
    ("dev[cpu bool mask]", lambda d: torch.ones(4, 4, device=d)[torch.tensor([True, False, True, False])], "ok"),
    ("dev[cpu 0-dim index]", lambda d: torch.ones(4, 4, device=d)[torch.tensor(1)], "ok"),
    ("dev[cpu rows, cpu cols]",
     lambda d: torch.ones(4, 4, device=d)[torch.tensor([0, 1]), torch.tensor([2, 3])], "ok"),
    ("tensor_split(dev, cpu indices tensor)",
     lambda d: torch.tensor_split(torch.arange(8.0, device=d), torch.tensor([2, 5])), "ok"),
    ("tensor_split(dev, cpu 0-dim sections)",
     lambda d: torch.tensor_split(torch.arange(8.0, device=d), torch.tensor(2)), "ok"),
    # Copies across devices are the point of these ops.
    ("copy_(dev <- cpu)", lambda d: torch.zeros(4, device=d).copy_(_cpu(4)), "ok"),
    ("copy_(cpu <- dev)", lambda d: torch.zeros(4).copy_(torch.ones(4, device=d)), "ok-cpu"),
    ("copy_(dev <- cpu) broadcast", lambda d: torch.zeros(4, 4, device=d).copy_(_cpu(4)), "ok"),
    ("to(dev)", lambda d: _cpu(4).to(d), "ok"),
    ("dev.to(other cpu tensor)", lambda d: torch.ones(4, device=d).to(_cpu(2)), "ok-cpu"),
    ("cpu.to(other dev tensor)", lambda d: _cpu(4).to(torch.ones(2, device=d)), "ok"),
    # Metadata-only calls look at shapes, not data.
    ("expand_as(dev, cpu)", lambda d: torch.ones(1, device=d).expand_as(_cpu(4)), "ok"),
    ("view_as(dev, cpu)", lambda d: torch.ones(4, device=d).view_as(_cpu(2, 2)), "ok"),
    ("is_same_size(dev, cpu)", lambda d: torch.ones(4, device=d).is_same_size(_cpu(4)), "ok"),
    ("is_set_to(dev, cpu)", lambda d: torch.zeros(4, device=d).is_set_to(_cpu(4)), "ok"),
    ("zeros_like(cpu, device=dev)", lambda d: torch.zeros_like(_cpu(4), device=d), "ok"),
]


# Cases whose results CUDA leaves on several devices ("dev" for the device):
# the foreach slow path runs one op per list position.
RESULT_DEVICES = {"_foreach_add([dev, cpu], 1)": ["dev", "cpu"]}

# Random cases: their values are not compared with the CPU's.
RANDOM_CASES = {"bernoulli_(dev, cpu p)"}


def _tensors(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def outcome(call, device):
    """("ok", [result tensors on the CPU], [their devices]) when ``call(device)`` returns,
    ("raise", message, None) when it raises RuntimeError; other exceptions propagate."""
    try:
        result = call(device)
    except RuntimeError as e:
        return "raise", str(e), None
    if not isinstance(result, (torch.Tensor, tuple, list)):
        return "ok", [torch.tensor(result)], []
    tensors = _tensors(result)
    return "ok", [t.cpu() for t in tensors], [str(t.device) for t in tensors]


if __name__ == "__main__":
    # python tests/asic/mixed_device_cases.py cuda: the table's outcomes on CUDA.
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    mismatches = 0
    for name, call, expected in CASES:
        try:
            got, detail, devices = outcome(call, device)
        except Exception as e:  # noqa: BLE001 -- report every kind here
            got, detail, devices = type(e).__name__, str(e), None
        ok = got == expected.split("-")[0]
        mismatches += not ok
        message = detail.splitlines()[0] if got != "ok" else devices
        print(f"{'  ' if ok else '!!'} {name:55s} expected={expected:6s} got={got:5s} {message}")
    print(f"{mismatches} mismatches of {len(CASES)}")
