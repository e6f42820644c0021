"""Checks that fake tensors predict my_asic's outputs, op by op, over op_db.

Every ATen op an OpInfo sample dispatches on my_asic (forward, and backward
with --backward) runs twice: on FakeTensors (the meta kernels that
torch.compile traces with) and for real. Sizes, strides, storage offsets and
aliasing must agree (torch._subclasses.fake_utils.CrossRefFakeMode). Used by
test_fake_tensor_conformance.py in subprocesses; runnable by hand:

    python tests/asic/fake_crossref_worker.py --ops add,nn.functional.linear [--backward]

Prints one JSON line per OpInfo: {"op", "forward", "backward"} with "pass",
"skip: ...", "error: ..." (raised under
the check where the CPU did not) or "mismatch: <aten op> (native|fallback): ..." where native
means the op has a my_asic kernel of its own (not the CPU fallback).
"""

import argparse
import json
import sys

import torch
from torch._subclasses.fake_tensor import MetadataMismatchError
from torch._subclasses.fake_utils import CrossRefFakeMode

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.asic.conformance.op_db import DEVICE, grads, op_id, run, to_cpu


def has_my_asic_kernel(func):
    return torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "PrivateUse1")


class Mismatch(Exception):
    """A fake/real disagreement on one ATen op (not an error of the sample)."""


class RecordingCrossRefFakeMode(CrossRefFakeMode):
    """CrossRefFakeMode that names the op and whether my_asic serves it natively.

    Only tensors on my_asic are checked: CPU tensors a sample makes are not
    this device's business."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        on_device = any(isinstance(t, torch.Tensor) and t.device.type == DEVICE
                        for t in torch.utils._pytree.tree_leaves((args, kwargs)))
        if not on_device:
            return func(*args, **kwargs)
        try:
            return super().__torch_dispatch__(func, types, args, kwargs)
        except (MetadataMismatchError, AssertionError) as e:
            kind = "native" if has_my_asic_kernel(func) else "fallback"
            first = str(e).strip().splitlines()[0][:300]
            raise Mismatch(f"{func} ({kind}): {first}") from e


def check(fn, samples):
    for sample in samples:
        try:
            fn(to_cpu(sample))
        except Exception:
            continue  # the CPU rejects this sample: nothing to predict
        try:
            with CrossRefFakeMode():
                fn(to_cpu(sample))
        except (MetadataMismatchError, AssertionError):
            # Fake tensors mispredict the CPU too (bilinear's backward views a
            # 0-element gradient that fake tensors do not alias): PyTorch's
            # meta kernels, not my_asic's, are wrong there.
            continue
        with RecordingCrossRefFakeMode():
            fn(sample)


def outcome(fn, samples):
    try:
        check(fn, samples)
        return "pass"
    except Mismatch as e:
        return f"mismatch: {e}"
    except Exception as e:  # raised on my_asic (or by a fake kernel) where the CPU did not
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        return f"error: {type(e).__name__}: {first}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", required=True, help="comma-separated OpInfo ids")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.empty(0, device=DEVICE)  # initialises the device: its native kernels register then

    from torch.testing._internal.common_methods_invocations import op_db

    by_id = {op_id(op): op for op in op_db}
    dtype = torch.float32
    for name in args.ops.split(","):
        op = by_id.get(name)
        result = {"op": name}
        if op is None:
            result["forward"] = result["backward"] = "skip: not in op_db"
        elif dtype not in op.supported_dtypes("cpu"):
            result["forward"] = result["backward"] = "skip: float32 not supported on the CPU"
        else:
            try:
                samples = list(op.sample_inputs(DEVICE, dtype, requires_grad=False))[: args.samples]
            except Exception as e:
                samples = None
                result["forward"] = result["backward"] = f"skip: no samples on my_asic ({type(e).__name__})"
            if samples is not None:
                result["forward"] = outcome(lambda s: run(op, s), samples)
                if args.backward and op.supports_autograd:
                    grad_samples = list(op.sample_inputs(DEVICE, dtype, requires_grad=True))[: args.samples]
                    result["backward"] = outcome(lambda s: grads(op, s), grad_samples)
                else:
                    result["backward"] = "skip: no autograd"
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
