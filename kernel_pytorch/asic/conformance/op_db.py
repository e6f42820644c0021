"""PyTorch's operator database (op_db) on my_asic against the CPU.

Each OpInfo's first samples run on both devices and must agree: values within
test_compare_cpu's tolerances for deterministic ops; shape, dtype and device
for random ones (by name, or ops op_db itself runs under a fixed seed and
leaves out of test_compare_cpu: attention with dropout); or both raise. Backward compares input gradients.

The worker runs in child processes (:func:`run_ops`, through
:mod:`kernel_pytorch.asic.conformance.runner`), so a crash ends one op, not the
sweep; runnable by hand too (with ``MY_ASIC_RUNTIME`` choosing the runtime):

    python -m kernel_pytorch.asic.conformance.op_db --items add,mul,nn.functional.relu [--backward] [--samples 3]

It prints one JSON line per OpInfo as soon as it is done:
{"id": ..., "forward": "pass" | "fail: ..." | "skip: ...", "backward": ...}.
"""

import argparse
import json
import sys

import torch
import torch.utils._pytree as pytree

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.asic.conformance.op_db_known_failures import EXPECTED_FAILURES
from kernel_pytorch.asic.conformance.runner import emit_all, first_line, list_items, run_items

DEVICE = "my_asic"

# Outputs that are random or uninitialised: compared by shape/dtype/device.
NONDETERMINISTIC_MARKERS = (
    "rand", "normal", "bernoulli", "dropout", "multinomial", "uniform", "exponential", "cauchy",
    "geometric", "log_normal", "empty", "new_empty", "randint", "poisson", "rrelu", "fractional_max_pool",
    "feature_alpha_dropout", "alpha_dropout",
)


def op_id(op):
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def is_nondeterministic(name):
    return any(marker in name for marker in NONDETERMINISTIC_MARKERS)


def draws_random_numbers(op, dtype):
    """Whether op_db runs this op under its own fixed seed (``wrapper_set_seed``: its samples
    draw random numbers, as attention with dropout_p > 0 does) and skips PyTorch's
    device-vs-CPU value comparison for it (TestCommon.test_compare_cpu, any device, this
    dtype). A device's generator draws other numbers than the CPU's, so only shapes, dtypes
    and devices can agree. Both conditions: op_db skips that comparison for some
    deterministic ops too (integer casts, conv3d), whose values the kit does compare."""
    code = getattr(getattr(op, "op", None), "__code__", None)
    if code is None or "wrapper_set_seed" not in code.co_names:
        return False
    for info in getattr(op, "decorators", ()):
        if getattr(info, "cls_name", None) != "TestCommon" or getattr(info, "test_name", None) != "test_compare_cpu":
            continue
        if getattr(info, "device_type", None) not in (None, "privateuse1", DEVICE):
            continue
        dtypes = getattr(info, "dtypes", None)
        if dtypes is not None and dtype not in dtypes:
            continue
        if any(getattr(d, "__qualname__", "").startswith("skip.") for d in getattr(info, "decorators", ())):
            return True
    return False


def is_my_asic_device(value):
    if isinstance(value, str):
        return value.split(":")[0] == DEVICE
    return isinstance(value, torch.device) and value.type == DEVICE


def to_cpu(sample):
    """The CPU twin of a sample made for my_asic (as test_compare_cpu does),
    with device= arguments of factory ops pointing at the CPU too."""

    def move(t):
        if not isinstance(t, torch.Tensor):
            return "cpu" if is_my_asic_device(t) else t
        moved = t.detach().cpu()
        return moved.requires_grad_(True) if t.requires_grad else moved

    cpu_sample = sample.transform(move)
    cpu_sample.args = tuple("cpu" if is_my_asic_device(a) else a for a in cpu_sample.args)
    for key, value in list(cpu_sample.kwargs.items()):
        if is_my_asic_device(value):
            cpu_sample.kwargs[key] = "cpu"
    return cpu_sample


def tensors_of(out):
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def compare(expected, got, values):
    exp_leaves, got_leaves = pytree.tree_leaves(expected), pytree.tree_leaves(got)
    if len(exp_leaves) != len(got_leaves):
        raise AssertionError(f"{len(got_leaves)} outputs on my_asic, {len(exp_leaves)} on the CPU")
    for e, g in zip(exp_leaves, got_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                raise AssertionError(f"my_asic returned {type(g).__name__} where the CPU returned a tensor")
            if e.device.type == "cpu" and g.device.type != DEVICE:
                raise AssertionError(f"result on {g.device}, not on my_asic")
            if e.layout != torch.strided:
                e = e.to_dense()
                g = g.to_dense()
            if values:
                # PyTorch's own device-vs-CPU comparison (test_ops.py,
                # test_compare_cpu) uses these tolerances.
                torch.testing.assert_close(g.detach().cpu(), e.detach(), equal_nan=True, atol=1e-3, rtol=1e-3)
            elif g.shape != e.shape or g.dtype != e.dtype:
                raise AssertionError(f"got {g.dtype}{tuple(g.shape)}, CPU {e.dtype}{tuple(e.shape)}")
        elif values and isinstance(e, (int, float, bool, complex)) and e == e:
            if e != g:
                raise AssertionError(f"got {g!r}, CPU {e!r}")


def run(fn, sample, seed=0):
    torch.manual_seed(seed)
    # output_process_fn_grad canonicalises results that are not unique
    # (signs of singular vectors, say), as test_compare_cpu does.
    return sample.output_process_fn_grad(fn(sample.input, *sample.args, **sample.kwargs))


def check_forward(op, samples, values):
    for sample in samples:
        try:
            expected = run(op, to_cpu(sample))
        except Exception as cpu_error:  # the CPU rejects it: my_asic must too
            try:
                run(op, sample)
            except Exception:
                continue
            raise AssertionError(f"CPU raised {type(cpu_error).__name__}, my_asic did not")
        got = run(op, sample)
        compare(expected, got, values)


def grads(op, sample):
    out = run(op, sample)
    outs = [t for t in tensors_of(out) if t.requires_grad and t.is_floating_point()]
    inputs = [t for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
              if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not inputs:
        return None
    loss = sum(o.sum() for o in outs)
    return torch.autograd.grad(loss, inputs, allow_unused=True)


def check_backward(op, samples, values):
    for sample in samples:
        try:
            expected = grads(op, to_cpu(sample))
        except Exception:
            continue  # not differentiable for this sample on the CPU either
        got = grads(op, sample)
        if expected is None:
            continue
        compare(tuple(e for e in expected), tuple(g for g in got), values)


def outcome(check, *args):
    try:
        check(*args)
        return "pass"
    except Exception as e:  # a failure is data here, reported per op
        return "fail: " + first_line(e)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True, help="comma-separated OpInfo ids (name or name.variant), or 'all'")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--samples", type=int, default=3, help="samples per op (first N of sample_inputs)")
    args = parser.parse_args(argv)
    # One intra-op thread on both sides: a my_asic backward computes on the
    # autograd engine's device thread, which starts with one thread
    # (csrc/aten/autograd_device_threads.h), and reductions such as
    # layer_norm's weight gradient round differently at another thread count
    # (beyond bfloat16's tolerance), on the CPU as on my_asic.
    torch.set_num_threads(1)

    from torch.testing._internal.common_methods_invocations import op_db

    dtype = getattr(torch, args.dtype)
    by_id = {op_id(op): op for op in op_db}
    if args.items == "all":
        emit_all(by_id)
        return 0
    for name in args.items.split(","):
        op = by_id.get(name)
        if op is None:
            print(json.dumps({"id": name, "forward": "skip: not in op_db", "backward": "skip"}), flush=True)
            continue
        result = {"id": name}
        values = not is_nondeterministic(name) and not draws_random_numbers(op, dtype)
        if dtype not in op.supported_dtypes("cpu"):
            result["forward"] = result["backward"] = f"skip: {args.dtype} not supported on the CPU"
        else:
            # Samples are made on my_asic and copied to the CPU, as PyTorch's
            # test_compare_cpu does, so factory ops get device="my_asic".
            def forward():
                samples = list(op.sample_inputs(DEVICE, dtype, requires_grad=False))[: args.samples]
                check_forward(op, samples, values)

            def backward():
                grad_samples = list(op.sample_inputs(DEVICE, dtype, requires_grad=True))[: args.samples]
                check_backward(op, grad_samples, values)

            result["forward"] = outcome(forward)
            if args.backward and op.supports_autograd and dtype.is_floating_point:
                result["backward"] = outcome(backward)
            else:
                result["backward"] = "skip: no autograd"
        print(json.dumps(result), flush=True)
    return 0


# One or more ops of each kind: elementwise, reductions, matmul family,
# indexing, shape ops, nn layers and losses, random, fft, linalg, complex.
REPRESENTATIVE = [
    "add", "mul", "div.no_rounding_mode", "pow", "exp", "log", "sigmoid", "tanh", "abs", "clamp", "where",
    "sum", "mean", "amax", "std", "cumsum", "max.reduction_with_dim", "sort", "topk", "argmax",
    "matmul", "mm", "bmm", "addmm", "baddbmm", "linalg.norm", "linalg.solve",
    "index_select", "gather", "scatter_add", "index_put", "masked_fill", "take_along_dim",
    "cat", "stack", "reshape", "permute", "transpose", "narrow", "flip", "roll", "repeat",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "softmax", "log_softmax",
    "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.layer_norm", "nn.functional.batch_norm",
    "nn.functional.embedding", "nn.functional.linear", "nn.functional.cross_entropy", "nn.functional.mse_loss",
    "nn.functional.dropout", "normal", "bernoulli", "fft.fft", "fft.ifft", "fft.hfft", "conj_physical", "real",
]
WORKER = "kernel_pytorch.asic.conformance.op_db"
CHUNK_TIMEOUT_S = 1800


def all_op_ids(runtime):
    """Every OpInfo id of op_db (name or name.variant), listed by a child process."""
    return list_items(WORKER, runtime)


def run_ops(ops, runtime, backward=True, dtype="float32", samples=3, chunk=None, progress=None, jobs=1):
    """``{op id: {"forward": result, "backward": result}}`` for ``ops`` on ``runtime``.

    Chunks of ops run in child processes; an op a child dies in (or hangs in) is
    reported as a crash for both phases and the rest goes on in a fresh process.
    """
    args = ["--dtype", dtype, "--samples", str(samples)] + (["--backward"] if backward else [])
    results = run_items(WORKER, ops, runtime, args, timeout_s=CHUNK_TIMEOUT_S, progress=progress, chunk=chunk,
                        jobs=jobs)  # fmt: skip
    return {op: {"id": op, "forward": e["result"], "backward": e["result"]} if e.get("crash") else e
            for op, e in results.items()}


def failures(results, mode):
    """[(op, phase, result)] that neither pass, skip, nor are expected to fail in ``mode``
    (``"host_addressable"`` or ``"not_host_addressable"``); a listed op that passes is one too."""
    found = []
    for op, entry in sorted(results.items()):
        listed = EXPECTED_FAILURES.get(op, {})
        applies = mode in listed.get("modes", ("host_addressable", "not_host_addressable"))
        for phase in ("forward", "backward"):
            result = entry[phase]
            expected = listed.get(phase) if applies else None
            if result == "pass" and expected:
                found.append((op, phase, f"passes but is listed as expected to fail ({expected})"))
            elif not result.startswith(("pass", "skip")) and not expected:
                found.append((op, phase, result))
    return found


def counts(results, phase):
    """(passed, ran, crashed) of ``phase`` over ``results`` (skips do not count as run)."""
    ran = [e[phase] for e in results.values() if not e[phase].startswith("skip")]
    return sum(r == "pass" for r in ran), len(ran), sum(r.startswith(("crash", "not run")) for r in ran)


if __name__ == "__main__":
    sys.exit(main())
