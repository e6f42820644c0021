"""GEMM (kpdr.h's core-op `gemm` entry) on the OpenCL runtime: PoCL in CI, a GPU where present."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from gemm_cases import script  # noqa: E402


def test_gemm_matches_the_cpu_for_transposed_strided_batched_alpha_beta_cases():
    out = run_on_opencl(script(("float32", "bfloat16", "float16")))
    result = json.loads(out.strip().splitlines()[-1])
    assert result["checked"] >= 3 * 27
    assert result["gemm_fallbacks"] == {}


def test_an_mlp_training_step_runs_its_matrix_products_without_falling_back():
    out = run_on_opencl("""
        import json, torch, kernel_pytorch
        from torch import nn
        def train(device, steps=3):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(),
                                  nn.Linear(64, 10)).to(device)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            gen = torch.Generator().manual_seed(1)
            losses = []
            for _ in range(steps):
                x = torch.randn(16, 32, generator=gen).to(device)
                y = torch.randint(0, 10, (16,), generator=gen).to(device)
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad(); loss.backward(); opt.step()
                losses.append(loss.item())
            return losses
        cpu = train("cpu")
        torch.my_asic.reset_fallback_stats()
        device = train("my_asic")
        print(json.dumps({"cpu": cpu, "device": device, "fallbacks": torch.my_asic.fallback_stats()}))
    """)
    result = json.loads(out.strip().splitlines()[-1])
    gemm_ops = {op: n for op, n in result["fallbacks"].items()
                if op.split(".")[0] in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmm_")}
    assert gemm_ops == {}, gemm_ops
    # The rest of the step (GELU, log_softmax, nll_loss, AdamW) has its entries too: nothing falls back.
    assert result["fallbacks"] == {}, result["fallbacks"]
    for a, b in zip(result["cpu"], result["device"]):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (result["cpu"], result["device"])


# Every transposition, sizes that leave partial tiles (128 x 128 and 32 x 32 tiles, 16- and
# 32-deep slices), batches with strides, a broadcast B, unaligned views (rows and buffer
# starts off the 16-byte grid: the tensor-core path's scalar loads) and aligned ones (its
# cp.async copies), alpha/beta, k = 0.
ABI_CASES = [
    *[dict(batch=1, m=130, n=129, k=47, trans_a=ta, trans_b=tb) for ta in (0, 1) for tb in (0, 1)],
    dict(batch=3, m=17, n=33, k=65, trans_a=1),
    dict(batch=2, m=9, n=31, k=40, trans_b=1, alpha=-0.5, beta=2.0),
    dict(batch=2, m=8, n=8, k=8, trans_a=1, trans_b=1, beta=1.0, pad=5),
    dict(batch=4, m=5, n=7, k=3, broadcast_b=True, alpha=2.0, beta=0.25),
    dict(batch=3, m=20, n=136, k=33, broadcast_b=True, trans_b=1),
    dict(batch=2, m=128, n=136, k=96),
    dict(batch=2, m=64, n=128, k=64, trans_a=1, trans_b=1, alpha=0.5, beta=-1.0),
    dict(batch=1, m=70, n=70, k=50, pad=3, offset=1),
    dict(batch=1, m=40, n=24, k=48, trans_a=1, offset=3, beta=0.5),
    dict(batch=1, m=6, n=4, k=0, beta=3.0),
    # 16-byte aligned rows (the tensor-core kernel's cp.async path) ending in partial 8-element
    # chunks and partial tiles, with more slices than pipeline stages.
    *[dict(batch=2, m=130, n=130, k=202, pad=6, trans_a=ta, trans_b=tb, beta=0.5) for ta in (0, 1) for tb in (0, 1)],
    # Whole 128 x 128 tiles with k a multiple of the slice depth (its unchecked copies) beside
    # a partial row of tiles.
    *[dict(batch=2, m=136, n=256, k=48, trans_a=ta, trans_b=tb) for ta in (0, 1) for tb in (0, 1)],
]
TOLERANCE = {"float32": dict(rtol=1e-5, atol=1e-4), "float16": dict(rtol=2e-3, atol=2e-2),
             "bfloat16": dict(rtol=1e-2, atol=6e-2)}


def _check_cases(runtime, dtype):
    from kpdr_gemm import DTYPE_BFLOAT16, DTYPE_FLOAT16, DTYPE_FLOAT32, gemm_case

    code = {"float32": DTYPE_FLOAT32, "float16": DTYPE_FLOAT16, "bfloat16": DTYPE_BFLOAT16}[dtype]
    for case in ABI_CASES:
        result, reference = gemm_case(runtime, dtype=code, **case)
        np.testing.assert_allclose(result, reference, **TOLERANCE[dtype], err_msg=str(case))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_gemm_entry_matches_numpy_through_the_abi(load_opencl, dtype):
    _check_cases(load_opencl(), dtype)


def test_the_tensor_core_kernel_matches_numpy_with_the_mma_instruction_emulated(load_opencl):
    # kp_gemm_mma's pipeline, swizzled staging and fragment layouts (its default shape), with
    # mma.sync, ldmatrix(.trans) and cp.async computed in OpenCL C as the PTX ISA defines
    # them; on NVIDIA the same kernel runs the instructions themselves. bfloat16 only:
    # float16 differs in the instruction's type suffix alone, and PoCL needs a minute per
    # dtype to compile the emulation for the four transpositions.
    _check_cases(load_opencl("gemm=mma_emulated"), "bfloat16")


def test_forcing_the_tensor_core_kernel_where_ptx_cannot_build_reports_the_build_error(load_opencl):
    from kpdr_gemm import DTYPE_BFLOAT16, DTYPE_FLOAT32, gemm_case

    runtime = load_opencl("gemm=mma")
    if b"NVIDIA" in runtime.properties(0).name.upper():
        pytest.skip("NVIDIA builds the PTX path (the next test covers it there)")
    with pytest.raises(Exception, match="tensor-core mma"):
        gemm_case(runtime, dtype=DTYPE_BFLOAT16, batch=1, m=8, n=8, k=8)
    # The runtime stays usable: float32 never takes the tensor-core path.
    result, reference = gemm_case(runtime, dtype=DTYPE_FLOAT32, batch=1, m=8, n=8, k=8)
    np.testing.assert_allclose(result, reference, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_tensor_core_kernel_itself_matches_numpy_where_the_device_has_one(load_opencl, dtype):
    runtime = load_opencl("gemm=mma")
    if b"NVIDIA" not in runtime.properties(0).name.upper() and b"H100" not in runtime.properties(0).name.upper():
        pytest.skip("needs an NVIDIA GPU of compute capability >= 8.0 (inline PTX mma.sync)")
    _check_cases(runtime, dtype)


def test_an_unknown_gemm_option_is_refused_naming_the_choices(load_uninitialized_opencl):
    runtime = load_uninitialized_opencl()
    assert runtime.kpdrInit(b"gemm=fast") != 0
    message = runtime.last_error_message()
    assert "gemm" in message and "portable" in message and "mma" in message
