"""The kernel table: each kernel_pytorch op on my_asic against the same op on the CPU.

Every op a runtime's ``kpdrGetKernels`` can serve runs at a small LLM shape in float32
and bfloat16 (strided rows included); the result must equal the CPU kernel library's
within the dtype's tolerance, and ``torch.my_asic.fallback_stats()`` tells whether
the runtime's kernel ran or kernel_pytorch fell back to the CPU for it. A runtime
without a kernel table passes on correctness and shows its fallback counts; the kit's
``--require-kernels`` turns any fallback of these ops into a failure.

Worker (``MY_ASIC_RUNTIME`` chooses the runtime):

    python -m kernel_pytorch.asic.conformance.kernels --items all
"""

import argparse
import sys

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.asic.conformance.runner import emit, first_line

DEVICE = "my_asic"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TOLERANCE = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _rand(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _angles(seq, half):
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), 1.0 / 10000 ** (torch.arange(half) / half))
    return angles.cos(), angles.sin()


def _rope_inputs():
    cos, sin = _angles(12, 16)
    return (_rand(2, 12, 4, 32, seed=5), cos, sin, False)


# op -> (kernel table entry, inputs in float32 on the CPU). Rows are strided where the
# ABI allows it (a row stride larger than the row), as views of bigger tensors.
CASES = {
    "rms_norm": ("rms_norm", lambda: (_rand(6, 200, seed=1)[:, :160], _rand(160, seed=2), 1e-6)),
    "fused_add_rms_norm": ("rms_norm", lambda: (_rand(6, 160, seed=1), _rand(6, 160, seed=3), _rand(160, seed=2), 1e-6)),
    "silu": ("silu", lambda: (_rand(5, 96, seed=4),)),
    "silu_and_mul": ("silu", lambda: (_rand(5, 2 * 96, seed=4),)),
    "apply_rope": ("rope", _rope_inputs),
    "softmax": ("softmax", lambda: (_rand(7, 300, seed=6)[:, :257] * 4, -1)),
    "decode_attention": ("decode_attention", lambda: (
        _rand(2, 8, 64, seed=7), _rand(2, 2, 40, 64, seed=8), _rand(2, 2, 40, 64, seed=9),
        torch.tensor([40, 17]), None)),
    "prefill_attention": ("prefill_attention", lambda: (
        _rand(2, 4, 24, 32, seed=10), _rand(2, 2, 24, 32, seed=11), _rand(2, 2, 24, 32, seed=12), True, None)),
    "matmul_vec": ("matmul_vec", lambda: (_rand(384, 256, seed=13), _rand(256, seed=14))),
}  # fmt: skip
ITEMS = [f"{op}.{dtype}" for op in CASES for dtype in DTYPES]


def _cast(value, dtype, device):
    if isinstance(value, torch.Tensor):
        cast = value.to(dtype) if value.is_floating_point() else value
        return cast.to(device)
    return value


def check(item):
    """``(result, fallback calls of the op)`` for ``"<op>.<dtype>"``."""
    from kernel_pytorch import asic

    op, dtype_name = item.rsplit(".", 1)
    dtype = DTYPES[dtype_name]
    _, make_inputs = CASES[op]
    inputs = make_inputs()
    function = getattr(torch.ops.kernel_pytorch, op)
    expected = function(*(_cast(v, dtype, "cpu") for v in inputs))
    asic.reset_fallback_stats()
    got = function(*(_cast(v, dtype, DEVICE) for v in inputs))
    torch.my_asic.synchronize()
    fallback = asic.fallback_stats().get(f"kernel_pytorch::{op}", 0)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for index, (e, g) in enumerate(zip(expected, got)):
        if g.device.type != DEVICE:
            return f"fail: output {index} is on {g.device}, not on my_asic", fallback
        torch.testing.assert_close(g.cpu(), e, **TOLERANCE[dtype], msg=lambda m: f"output {index}: {m}")
    return "pass", fallback


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True, help="comma-separated <op>.<dtype> items, or 'all'")
    args = parser.parse_args(argv)
    for item in (ITEMS if args.items == "all" else args.items.split(",")):
        if item not in ITEMS:
            emit(item, "skip: no such kernel case")
            continue
        fallback = None
        try:
            result, fallback = check(item)
        except Exception as error:  # a failure is data, reported per item
            result = "fail: " + first_line(error)
        emit(item, result, entry=CASES[item.rsplit(".", 1)[0]][0], fallback=fallback)
    return 0


if __name__ == "__main__":
    sys.exit(main())
