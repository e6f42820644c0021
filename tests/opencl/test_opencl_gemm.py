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


ABI_CASES = [
    dict(batch=1, m=17, n=33, k=65),
    dict(batch=3, m=17, n=33, k=65, trans_a=1),
    dict(batch=2, m=9, n=31, k=40, trans_b=1, alpha=-0.5, beta=2.0),
    dict(batch=2, m=8, n=8, k=8, trans_a=1, trans_b=1, beta=1.0, pad=5),
    dict(batch=4, m=5, n=7, k=3, broadcast_b=True, alpha=2.0, beta=0.25),
    dict(batch=1, m=6, n=4, k=0, beta=3.0),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_gemm_entry_matches_numpy_through_the_abi(load_opencl, dtype):
    from kpdr_gemm import DTYPE_BFLOAT16, DTYPE_FLOAT32, gemm_case

    runtime = load_opencl()
    code = DTYPE_FLOAT32 if dtype == "float32" else DTYPE_BFLOAT16
    tolerance = dict(rtol=1e-5, atol=1e-4) if dtype == "float32" else dict(rtol=1e-2, atol=6e-2)
    for case in ABI_CASES:
        result, reference = gemm_case(runtime, dtype=code, **case)
        np.testing.assert_allclose(result, reference, **tolerance, err_msg=str(case))
