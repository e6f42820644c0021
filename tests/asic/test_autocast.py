"""torch.autocast("my_asic", dtype=...) follows CUDA's cast policy.

Matmul-like ops run in the autocast dtype, range-sensitive ops (softmax,
log_softmax) in float32, and mixed-dtype ops like cat promote to the widest.
"""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("device_count")

LOWER_PRECISION = [torch.bfloat16, torch.float16]


def _matrix(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to("my_asic", dtype)


@pytest.mark.parametrize("dtype", LOWER_PRECISION)
def test_matmul_runs_in_autocast_dtype(dtype):
    a, b = _matrix(4, 8), _matrix(8, 3)
    with torch.autocast("my_asic", dtype=dtype):
        assert (a @ b).dtype == dtype


@pytest.mark.parametrize("dtype", LOWER_PRECISION)
def test_linear_runs_in_autocast_dtype(dtype):
    layer = torch.nn.Linear(8, 3).to("my_asic")
    with torch.autocast("my_asic", dtype=dtype):
        assert layer(_matrix(4, 8)).dtype == dtype


@pytest.mark.parametrize("dtype", LOWER_PRECISION)
def test_conv2d_runs_in_autocast_dtype(dtype):
    conv = torch.nn.Conv2d(3, 4, 3).to("my_asic")
    with torch.autocast("my_asic", dtype=dtype):
        assert conv(_matrix(1, 3, 6, 6)).dtype == dtype


@pytest.mark.parametrize("dtype", LOWER_PRECISION)
@pytest.mark.parametrize("op", [torch.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_family_runs_in_float32(dtype, op):
    low_precision_input = _matrix(4, 8, dtype=dtype)
    with torch.autocast("my_asic", dtype=dtype):
        assert op(low_precision_input, 1).dtype == torch.float32


def test_cat_promotes_mixed_dtypes_to_widest():
    with torch.autocast("my_asic", dtype=torch.bfloat16):
        assert torch.cat([_matrix(2, 2, dtype=torch.bfloat16), _matrix(2, 2)]).dtype == torch.float32


def test_matmul_outside_autocast_stays_float32():
    with torch.autocast("my_asic", dtype=torch.bfloat16):
        pass
    assert (_matrix(4, 8) @ _matrix(8, 3)).dtype == torch.float32


def test_autocast_state_is_visible_for_my_asic():
    with torch.autocast("my_asic", dtype=torch.float16):
        assert torch.is_autocast_enabled("my_asic")
        assert torch.get_autocast_dtype("my_asic") == torch.float16
    assert not torch.is_autocast_enabled("my_asic")


def test_autocast_matmul_is_close_to_float32_result():
    a, b = _matrix(16, 32), _matrix(32, 8)
    with torch.autocast("my_asic", dtype=torch.bfloat16):
        low = (a @ b).float().cpu()
    torch.testing.assert_close(low, (a.cpu() @ b.cpu()), rtol=2e-2, atol=5e-2)


def test_autocast_backward_gives_float32_grads_for_float32_params():
    layer = torch.nn.Linear(8, 3).to("my_asic")
    with torch.autocast("my_asic", dtype=torch.bfloat16):
        loss = layer(_matrix(4, 8)).float().sum()
    loss.backward()
    assert layer.weight.grad.dtype == torch.float32


@pytest.mark.parametrize("dtype", LOWER_PRECISION)
def test_binary_cross_entropy_is_refused_like_cuda(dtype):
    probabilities = torch.rand(4, device="my_asic")
    with torch.autocast("my_asic", dtype=dtype):
        with pytest.raises(RuntimeError, match="(?s)unsafe to autocast.*binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(probabilities, torch.rand(4, device="my_asic"))


def test_binary_cross_entropy_with_logits_runs_in_float32():
    with torch.autocast("my_asic", dtype=torch.float16):
        loss = F.binary_cross_entropy_with_logits(_matrix(4, 3), torch.rand(4, 3, device="my_asic"))
    assert loss.dtype == torch.float32


def test_binary_cross_entropy_outside_autocast_still_works():
    loss = F.binary_cross_entropy(torch.full((4,), 0.5, device="my_asic"), torch.ones(4, device="my_asic"))
    assert loss.item() == pytest.approx(0.6931, abs=1e-4)


@pytest.mark.parametrize("dtype", LOWER_PRECISION)
def test_norm_of_reduced_precision_input_runs_in_float32(dtype):
    with torch.autocast("my_asic", dtype=dtype):
        assert torch.norm(_matrix(4, dtype=dtype)).dtype == torch.float32
        assert torch.norm(_matrix(3, 4, dtype=dtype), 2, [1]).dtype == torch.float32
