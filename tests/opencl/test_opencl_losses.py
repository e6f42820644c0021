"""The softmax family, nll_loss / cross_entropy, argmax/argmin, var/std and layer_norm on the
OpenCL runtime (kpdr.h's softmax_dim, nll_loss, layer_norm and reduce entries): PoCL in CI, a
GPU where present. Results equal torch on the CPU and none of these ops falls back."""

import json
import sys
from pathlib import Path

import pytest

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from loss_cases import script  # noqa: E402


@pytest.mark.parametrize("dtypes", [("float32",), ("bfloat16", "float16")], ids=["float32", "half-types"])
def test_losses_and_statistics_match_the_cpu_without_falling_back(dtypes):
    result = json.loads(run_on_opencl(script(dtypes)).strip().splitlines()[-1])
    assert result["checked"] >= 100 * len(dtypes)
    assert result["fallbacks"] == {}
    assert result["errors"] == 5


def test_the_entries_match_numpy_through_the_abi(load_opencl):
    from kpdr_losses import check_entries

    check_entries(load_opencl())


CROSS_ENTROPY_STEP = """
import json, torch, kernel_pytorch
from torch import nn

def train(device, steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen).to(device)
        y = torch.randint(0, 10, (16,), generator=gen)
        y[::5] = -100  # ignored samples
        loss = nn.functional.cross_entropy(model(x), y.to(device))
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss.item())
    return losses

cpu = train("cpu")
torch.my_asic.reset_fallback_stats()
device = train("my_asic")
print(json.dumps({"cpu": cpu, "device": device, "fallbacks": torch.my_asic.fallback_stats()}))
"""


def test_a_cross_entropy_training_step_with_layer_norm_and_adamw_runs_without_falling_back():
    # (label smoothing adds integer mask ops, eq/bitwise_not/masked_fill_, which are not these entries')
    result = json.loads(run_on_opencl(CROSS_ENTROPY_STEP).strip().splitlines()[-1])
    assert result["fallbacks"] == {}, result["fallbacks"]
    assert result["device"] == pytest.approx(result["cpu"], rel=1e-4)
