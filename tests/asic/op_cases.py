"""A sweep of common ATen ops, each written once and run on any device.

Each case is ``name -> fn(device) -> Tensor``: it builds its inputs on the CPU
from a fixed seed, moves them to ``device``, runs the op there and returns the
result. Running a case on "cpu" and on "my_asic" and comparing the results
checks the my_asic path (native kernels, CPU fallback, copies) against
PyTorch's CPU kernels. Random ops reseed first, so with the same seed the
device draws the same numbers as the CPU where it draws with the CPU's
kernels (host-addressable memory, or an op the runtime does not bring); a
runtime's own random entry (kpdr.h) draws its own sequence, as CUDA does,
and DEVICE_GENERATOR_CASES are then checked for their support and their
reproducibility instead (same_draws).

Shared by test_ops_vs_cpu.py (in process) and test_fallback.py (in a
subprocess with MY_ASIC_HOST_ADDRESSABLE=0), which imports this module by path.
"""

import json

import torch
import torch.nn.functional as F

INPUT_SEED = 1234
RANDOM_OP_SEED = 99


def _inputs(device):
    """Fixed float32 inputs on ``device``: two matrices, an image batch, conv weights, indices."""
    gen = torch.Generator().manual_seed(INPUT_SEED)
    cpu = {
        "a": torch.randn(4, 5, generator=gen),
        "b": torch.randn(4, 5, generator=gen),
        "m": torch.randn(5, 3, generator=gen),
        "image": torch.randn(2, 3, 8, 8, generator=gen),
        "weight": torch.randn(4, 3, 3, 3, generator=gen),
        "index": torch.tensor([0, 2, 1, 3]),
    }
    return {name: t.to(device) for name, t in cpu.items()}


def _seeded(fn):
    """Runs a random op right after torch.manual_seed(RANDOM_OP_SEED)."""

    def run(device):
        torch.manual_seed(RANDOM_OP_SEED)
        return fn(device)

    return run


def _in_place_on_view_mutates_base(device):
    base = torch.zeros(3, 4, device=device)
    base[1].add_(5.0)  # the view base[1] shares base's memory
    base[:, 2].mul_(0.0).add_(-1.0)  # a strided (non-contiguous) view
    return base


def _out_argument(device):
    x = _inputs(device)
    out = torch.empty(4, 5, device=device)
    torch.add(x["a"], x["b"], out=out)
    return out


CASES = {
    # elementwise
    "add": lambda d: _inputs(d)["a"] + _inputs(d)["b"],
    "mul_scalar": lambda d: _inputs(d)["a"] * 2.5,
    "div": lambda d: _inputs(d)["a"] / (_inputs(d)["b"].abs() + 1),
    "exp": lambda d: _inputs(d)["a"].exp(),
    "pow": lambda d: _inputs(d)["a"].abs().pow(1.5),
    "clamp": lambda d: _inputs(d)["a"].clamp(-0.5, 0.5),
    "where": lambda d: torch.where(_inputs(d)["a"] > _inputs(d)["b"], _inputs(d)["a"], _inputs(d)["b"]),
    "masked_fill": lambda d: _inputs(d)["a"].masked_fill(_inputs(d)["a"] < 0, 0.0),
    "in_place_on_view": _in_place_on_view_mutates_base,
    "out_argument": _out_argument,
    # reductions
    "sum_dim": lambda d: _inputs(d)["a"].sum(1),
    "mean": lambda d: _inputs(d)["a"].mean(),
    "max_dim": lambda d: _inputs(d)["a"].max(1).values,
    "argmax": lambda d: _inputs(d)["a"].argmax(1),
    "var": lambda d: _inputs(d)["a"].var(0),
    "cumsum": lambda d: _inputs(d)["a"].cumsum(1),
    # linear algebra and convolution
    "matmul": lambda d: _inputs(d)["a"] @ _inputs(d)["m"],
    "bmm": lambda d: torch.bmm(_inputs(d)["a"].unsqueeze(0), _inputs(d)["m"].unsqueeze(0)),
    "einsum": lambda d: torch.einsum("ij,ij->i", _inputs(d)["a"], _inputs(d)["b"]),
    "conv2d": lambda d: F.conv2d(_inputs(d)["image"], _inputs(d)["weight"], padding=1),
    "max_pool2d": lambda d: F.max_pool2d(_inputs(d)["image"], 2),
    # indexing
    "index_select": lambda d: _inputs(d)["a"].index_select(0, _inputs(d)["index"]),
    "gather": lambda d: _inputs(d)["a"].gather(1, torch.tensor([[0, 4]] * 4, device=d)),
    "scatter": lambda d: torch.zeros(4, 5, device=d).scatter(1, torch.tensor([[1]] * 4, device=d), _inputs(d)["a"]),
    "index_put_": lambda d: _inputs(d)["a"].index_put_((_inputs(d)["index"],), torch.tensor(1.0, device=d)),
    "advanced_indexing": lambda d: _inputs(d)["a"][_inputs(d)["index"], 1:3],
    "boolean_mask": lambda d: _inputs(d)["a"][_inputs(d)["a"] > 0],
    "nonzero": lambda d: (_inputs(d)["a"] > 0).nonzero(),
    "embedding": lambda d: F.embedding(_inputs(d)["index"], _inputs(d)["a"]),
    # shape and ordering
    "cat": lambda d: torch.cat([_inputs(d)["a"], _inputs(d)["b"]], 1),
    "stack": lambda d: torch.stack([_inputs(d)["a"], _inputs(d)["b"]]),
    "transpose_contiguous": lambda d: _inputs(d)["a"].t().contiguous(),
    "flip": lambda d: _inputs(d)["a"].flip(0),
    "sort": lambda d: _inputs(d)["a"].sort(1).values,
    "topk_indices": lambda d: _inputs(d)["a"].topk(2, 1).indices,
    "unique": lambda d: torch.unique(_inputs(d)["index"] % 2),
    # neural-network functions
    "softmax": lambda d: _inputs(d)["a"].softmax(1),
    "log_softmax": lambda d: F.log_softmax(_inputs(d)["a"], 1),
    "layer_norm": lambda d: F.layer_norm(_inputs(d)["a"], (5,)),
    "batch_norm_training": lambda d: F.batch_norm(_inputs(d)["image"], None, None, training=True),
    "cross_entropy": lambda d: F.cross_entropy(_inputs(d)["a"], _inputs(d)["index"]),
    # factories
    "full": lambda d: torch.full((2, 3), 7.0, device=d),
    "arange": lambda d: torch.arange(2, 11, 3, device=d),
    "linspace": lambda d: torch.linspace(0, 1, 5, device=d),
    "eye": lambda d: torch.eye(3, device=d),
    # random (reseeded: see the module docstring)
    "dropout": _seeded(lambda d: F.dropout(_inputs(d)["a"], 0.5, training=True)),
    "rand": _seeded(lambda d: torch.rand(6, device=d)),
    "randn": _seeded(lambda d: torch.randn(6, device=d)),
    "randint": _seeded(lambda d: torch.randint(0, 10, (6,), device=d)),
    "randperm": _seeded(lambda d: torch.randperm(6, device=d)),
    "multinomial": _seeded(lambda d: torch.multinomial(_inputs(d)["a"].abs(), 2)),
    "normal_": _seeded(lambda d: torch.empty(6, device=d).normal_(2.0, 0.5)),
}


# Random cases a runtime's random entry serves when memory is not host addressable.
DEVICE_GENERATOR_CASES = ("dropout", "rand", "randint", "randn", "normal_", "multinomial")


def same_draws(name, device):
    """For a case drawn by the device's own generator: why its result is not of the CPU's
    dtype and shape, outside the distribution's support, or not reproduced by the same
    seed; None if it is all three."""
    expected, actual = CASES[name]("cpu"), CASES[name](device).cpu()
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return f"got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if not torch.equal(actual, CASES[name](device).cpu()):
        return "the same seed drew different values"
    a = _inputs("cpu")["a"]
    distinct = lambda: bool(torch.isfinite(actual).all()) and actual.unique().numel() == actual.numel()
    support = {
        "dropout": lambda: bool(((actual == 0) | torch.isclose(actual, 2 * a)).all()),
        "rand": lambda: bool(((actual >= 0) & (actual < 1)).all()),
        "randint": lambda: bool(((actual >= 0) & (actual < 10)).all()),
        "randn": distinct,
        "normal_": distinct,
        # without replacement: distinct categories of non-zero weight in each row
        "multinomial": lambda: bool(((actual >= 0) & (actual < a.shape[1])).all())
        and all(len(set(r)) == len(r) and bool((a[i, r].abs() > 0).all()) for i, r in enumerate(actual.tolist())),
    }[name]()
    return None if support else f"values outside the distribution: {actual.flatten()[:8].tolist()}"


def mismatch(expected, actual):
    """Why ``actual`` (any device) differs from ``expected`` (CPU), or None if it matches.

    Floating results must agree to 1e-5 (summation order may differ); every
    other dtype must be equal. dtype and shape must be identical.
    """
    actual = actual.cpu()
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return f"got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if expected.is_floating_point():
        same = torch.allclose(actual, expected, rtol=1e-5, atol=1e-5)
    else:
        same = torch.equal(actual, expected)
    if not same:
        return f"values differ: got {actual.flatten()[:8].tolist()}, expected {expected.flatten()[:8].tolist()}"
    return None


def run_case_on(name, device, cases=None, compare=None):
    """Runs case ``name`` on ``device``; returns (result on device, why it differs from CPU or None).

    ``cases`` and ``compare`` default to this module's CASES and mismatch;
    other case modules (sparse_cases.py) pass their own.
    """
    cases, compare = cases or CASES, compare or mismatch
    expected = cases[name]("cpu")
    actual = cases[name](device)
    return actual, compare(expected, actual)


def report_all_cases(device, cases=None, compare=None, device_generator=False):
    """Runs every case on ``device`` and prints {name: problem or None} as JSON (subprocess use);
    ``device_generator``: DEVICE_GENERATOR_CASES are checked with same_draws."""
    cases = cases or CASES
    report = {}
    for name in cases:
        try:
            if device_generator and name in DEVICE_GENERATOR_CASES:
                actual, problem = CASES[name](device), same_draws(name, device)
            else:
                actual, problem = run_case_on(name, device, cases, compare)
            if problem is None and actual.device.type != torch.device(device).type:
                problem = f"result is on {actual.device}, expected {device}"
        except Exception as error:  # reported per case, so one failure doesn't hide the rest
            problem = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        report[name] = problem
    print(json.dumps(report))
