"""PyTorch's operator database through ``torch.compile`` on my_asic, against the CPU.

Each OpInfo's first sample runs compiled (the default backend: Inductor on
host-addressable memory, the ``"my_asic"`` backend otherwise) on the CPU and on
my_asic, and both are compared with CPU eager (test_compare_cpu's tolerances;
shapes only for random ops). An op counts against my_asic only where the
CPU's compiled run passes: what Inductor itself cannot compile is not the
device's failure.

Runs in child processes like the op_db worker (:func:`run_ops`); by hand:

    python -m kernel_pytorch.asic.conformance.compile_op_db --items add,mul [--samples 1]

It prints one JSON line per OpInfo: {"id", "cpu": result, "my_asic": result},
results "pass" | "fail: ..." | "skip: ...".
"""

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.asic.conformance.op_db import DEVICE, compare, is_nondeterministic, op_id, run, to_cpu
from kernel_pytorch.asic.conformance.runner import emit_all, first_line, list_items, run_items

WORKER = "kernel_pytorch.asic.conformance.compile_op_db"
CHUNK_TIMEOUT_S = 1800


def compiled(op):
    """A fresh compiled function that calls the OpInfo's op (one per device, no shared guards)."""

    def call(*args, **kwargs):
        return op(*args, **kwargs)

    return torch.compile(call, dynamic=False)


def check(op, sample, values, on_device):
    expected = run(op, to_cpu(sample))
    torch._dynamo.reset()
    got = run(compiled(op), sample if on_device else to_cpu(sample))
    compare(expected, got, values) if on_device else _compare_on_cpu(expected, got, values)


def _compare_on_cpu(expected, got, values):
    leaves_e = torch.utils._pytree.tree_leaves(expected)
    leaves_g = torch.utils._pytree.tree_leaves(got)
    if len(leaves_e) != len(leaves_g):
        raise AssertionError(f"{len(leaves_g)} outputs compiled, {len(leaves_e)} eager")
    for e, g in zip(leaves_e, leaves_g):
        if isinstance(e, torch.Tensor):
            if values:
                torch.testing.assert_close(g, e, equal_nan=True, atol=1e-3, rtol=1e-3)
            elif g.shape != e.shape or g.dtype != e.dtype:
                raise AssertionError(f"compiled {g.dtype}{tuple(g.shape)}, eager {e.dtype}{tuple(e.shape)}")


def outcome(op, samples, values, on_device):
    try:
        for sample in samples:
            try:
                run(op, to_cpu(sample))
            except Exception:
                continue  # eager CPU rejects the sample: nothing to compare
            check(op, sample, values, on_device)
        return "pass"
    except Exception as e:  # a failure is data here, reported per op
        return "fail: " + first_line(e)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True, help="comma-separated OpInfo ids, or 'all'")
    parser.add_argument("--samples", type=int, default=1, help="samples per op (first N of sample_inputs)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the op_db worker: reductions round alike on both sides
    torch._dynamo.config.cache_size_limit = 64

    from torch.testing._internal.common_methods_invocations import op_db

    by_id = {op_id(op): op for op in op_db}
    if args.items == "all":
        emit_all(by_id)
        return 0
    for name in args.items.split(","):
        op = by_id.get(name)
        if op is None:
            print(json.dumps({"id": name, "cpu": "skip: not in op_db", "my_asic": "skip: not in op_db"}), flush=True)
            continue
        result = {"id": name}
        if torch.float32 not in op.supported_dtypes("cpu"):
            result["cpu"] = result["my_asic"] = "skip: float32 not supported on the CPU"
        else:
            try:
                samples = list(op.sample_inputs(DEVICE, torch.float32, requires_grad=False))[: args.samples]
            except Exception as e:
                samples = None
                result["cpu"] = result["my_asic"] = f"skip: no samples on my_asic ({type(e).__name__})"
            if samples is not None:
                values = not is_nondeterministic(name)
                result["cpu"] = outcome(op, samples, values, on_device=False)
                result["my_asic"] = outcome(op, samples, values, on_device=True)
        print(json.dumps(result), flush=True)
    return 0


def all_op_ids(runtime):
    """Every OpInfo id of op_db, listed by a child process."""
    return list_items(WORKER, runtime)


def run_ops(ops, runtime, samples=1, chunk=20, jobs=1, progress=None):
    """``{op id: {"cpu": result, "my_asic": result}}``; chunks of ``chunk`` ops in child
    processes, ``jobs`` of them at a time. A crash is the op's result on both sides."""
    args = ["--samples", str(samples)]
    chunks = [ops[i:i + chunk] for i in range(0, len(ops), chunk)]

    def one(items):
        return run_items(WORKER, items, runtime, args, timeout_s=CHUNK_TIMEOUT_S, progress=progress)

    results = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for part in pool.map(one, chunks):
            results.update(part)
    return {op: {"id": op, "cpu": e["result"], "my_asic": e["result"]} if e.get("crash") else e
            for op, e in results.items()}


def summary(results):
    """(ops compiled on my_asic that pass, of the ops whose compiled CPU run passes, crashes)."""
    cpu_pass = [e for e in results.values() if e["cpu"] == "pass"]
    passed = sum(e["my_asic"] == "pass" for e in cpu_pass)
    crashes = sum(e["my_asic"].startswith(("crash", "not run")) for e in results.values())
    return passed, len(cpu_pass), crashes


if __name__ == "__main__":
    sys.exit(main())
