"""Bad input raises an error that names the problem (and the process stays usable)."""

import pytest
import torch

import kernel_pytorch.ops as kops

ops = torch.ops.kernel_pytorch


def raises(match):
    return pytest.raises((RuntimeError, ValueError), match=match)


@pytest.fixture(params=["cpu", "my_asic"])
def device(request):
    if request.param == "my_asic":
        request.getfixturevalue("my_asic")
    return torch.device(request.param)


def test_rms_norm_weight_of_the_wrong_length(device):
    with raises(r"weight must have shape \[8\]"):
        ops.rms_norm(torch.randn(2, 8, device=device), torch.randn(7, device=device), 1e-6)


def test_rms_norm_mixed_dtypes(device):
    with raises(r"weight has dtype .*BFloat16.* but x has dtype Float"):
        ops.rms_norm(torch.randn(2, 8, device=device), torch.randn(8, device=device).bfloat16(), 1e-6)


def test_rms_norm_negative_eps():
    with raises("eps must be a finite number >= 0"):
        ops.rms_norm(torch.randn(2, 8), torch.randn(8), -1.0)


def test_rms_norm_zero_dimensional_input():
    with raises("at least one dimension"):
        ops.rms_norm(torch.tensor(1.0), torch.randn(1), 1e-6)


def test_fused_add_rms_norm_residual_of_another_shape(device):
    with raises(r"residual must have x's shape"):
        ops.fused_add_rms_norm(torch.randn(2, 8, device=device), torch.randn(3, 8, device=device),
                               torch.randn(8, device=device), 1e-6)


def test_mixed_devices(my_asic):
    with raises(r"weight is on cpu but x is on my_asic:0"):
        ops.rms_norm(torch.randn(2, 8, device=my_asic), torch.randn(8), 1e-6)


def test_mixed_devices_in_attention(my_asic):
    with raises(r"k_cache is on cpu but q is on my_asic:0"):
        ops.decode_attention(torch.randn(1, 2, 8, device=my_asic), torch.randn(1, 2, 4, 8),
                             torch.randn(1, 2, 4, 8), None, None)


def test_mixed_devices_in_rope(my_asic):
    with raises(r"cos and sin must be on x's device"):
        ops.apply_rope(torch.randn(1, 2, 1, 8, device=my_asic), torch.randn(2, 4), torch.randn(2, 4), False)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.complex64])
def test_unsupported_dtype_names_the_supported_ones(dtype, device):
    x = torch.zeros(2, 8, dtype=dtype, device=device)
    with raises(r"x has dtype .*but the kernels support float32, bfloat16 and float16"):
        ops.silu(x)


def test_unsupported_dtype_in_matmul_vec(device):
    with raises("w has dtype Int"):
        ops.matmul_vec(torch.zeros(3, 4, dtype=torch.int32, device=device), torch.zeros(4, dtype=torch.int32, device=device))


def test_silu_and_mul_odd_last_dim(device):
    with raises(r"last dimension of x must be even"):
        ops.silu_and_mul(torch.randn(3, 7, device=device))


def test_apply_rope_odd_head_dim(device):
    with raises(r"head_dim .* must be even"):
        ops.apply_rope(torch.randn(1, 2, 1, 7, device=device), torch.randn(2, 3, device=device),
                       torch.randn(2, 3, device=device), False)


def test_apply_rope_three_dimensional_x(device):
    with raises(r"x must be \[batch, seq, heads, head_dim\]"):
        ops.apply_rope(torch.randn(2, 1, 8, device=device), torch.randn(2, 4, device=device),
                       torch.randn(2, 4, device=device), False)


def test_apply_rope_tables_of_the_wrong_shape(device):
    with raises(r"cos and sin must be \[seq, head_dim // 2\] = \[2, 4\]"):
        ops.apply_rope(torch.randn(1, 2, 1, 8, device=device), torch.randn(2, 8, device=device),
                       torch.randn(2, 8, device=device), False)


def test_apply_rope_cos_and_sin_of_different_shapes(device):
    with raises("cos and sin must have one shape"):
        ops.apply_rope(torch.randn(1, 2, 1, 8, device=device), torch.randn(2, 4, device=device),
                       torch.randn(1, 2, 4, device=device), False)


def test_softmax_dim_out_of_range(device):
    with raises(r"dim 2 is out of range for a tensor of 2 dimensions"):
        ops.softmax(torch.randn(2, 3, device=device), 2)


def test_decode_heads_not_a_multiple_of_kv_heads(device):
    with raises(r"query heads \(6\) must be a multiple of the number of key/value heads \(4\)"):
        ops.decode_attention(torch.randn(1, 6, 8, device=device), torch.randn(1, 4, 5, 8, device=device),
                             torch.randn(1, 4, 5, 8, device=device), None, None)


def test_prefill_heads_not_a_multiple_of_kv_heads(device):
    with raises(r"query heads \(3\) must be a multiple of the number of key/value heads \(2\)"):
        ops.prefill_attention(torch.randn(1, 3, 4, 8, device=device), torch.randn(1, 2, 4, 8, device=device),
                              torch.randn(1, 2, 4, 8, device=device), True, None)


@pytest.mark.parametrize("bad", [[0, 3], [3, 6], [-1, 2]], ids=["zero", "past_T", "negative"])
def test_decode_lengths_outside_one_to_T(bad, device):
    q, k = torch.randn(2, 4, 8, device=device), torch.randn(2, 2, 5, 8, device=device)
    with raises(r"every length must lie in 1..T = 1..5"):
        ops.decode_attention(q, k, k, torch.tensor(bad, device=device), None)


def test_decode_lengths_of_the_wrong_size(device):
    q, k = torch.randn(2, 4, 8, device=device), torch.randn(2, 2, 5, 8, device=device)
    with raises(r"lengths must be \[batch\] = \[2\]"):
        ops.decode_attention(q, k, k, torch.tensor([1, 2, 3], device=device), None)


def test_decode_float_lengths(device):
    q, k = torch.randn(2, 4, 8, device=device), torch.randn(2, 2, 5, 8, device=device)
    with raises("lengths must be an integer tensor"):
        ops.decode_attention(q, k, k, torch.tensor([1.0, 2.0], device=device), None)


def test_decode_cache_with_another_head_dim(device):
    with raises(r"k_cache must be \[batch=1, kv_heads, T, head_dim=8\]"):
        ops.decode_attention(torch.randn(1, 2, 8, device=device), torch.randn(1, 2, 5, 16, device=device),
                             torch.randn(1, 2, 5, 16, device=device), None, None)


def test_decode_v_cache_of_another_shape(device):
    with raises("v_cache must have k_cache's shape"):
        ops.decode_attention(torch.randn(1, 2, 8, device=device), torch.randn(1, 2, 5, 8, device=device),
                             torch.randn(1, 2, 6, 8, device=device), None, None)


def test_decode_empty_cache(device):
    with raises("at least one position"):
        ops.decode_attention(torch.randn(1, 2, 8, device=device), torch.randn(1, 2, 0, 8, device=device),
                             torch.randn(1, 2, 0, 8, device=device), None, None)


def test_decode_non_finite_scale():
    with raises("scale must be finite"):
        ops.decode_attention(torch.randn(1, 2, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8), None,
                             float("inf"))


def test_prefill_q_of_three_dimensions(device):
    with raises(r"q must be \[batch, heads, T, head_dim\]"):
        ops.prefill_attention(torch.randn(2, 4, 8, device=device), torch.randn(1, 2, 4, 8, device=device),
                              torch.randn(1, 2, 4, 8, device=device), True, None)


def test_matmul_vec_length_mismatch(device):
    with raises(r"x must be \[K\] = \[4\]"):
        ops.matmul_vec(torch.randn(3, 4, device=device), torch.randn(5, device=device))


def test_none_for_a_required_tensor():
    with pytest.raises((RuntimeError, TypeError)):
        ops.rms_norm(torch.randn(2, 3), None, 1e-6)


def test_errors_leave_the_device_usable(my_asic):
    for _ in range(3):
        with raises("must be even"):
            ops.silu_and_mul(torch.randn(3, 7, device=my_asic))
    x = torch.randn(3, 8)
    torch.testing.assert_close(ops.silu(x.to(my_asic)).cpu(), torch.nn.functional.silu(x))


def test_errors_are_raised_while_tracing_too():
    """The fake kernel of silu_and_mul checks the even last dimension as the real one does."""
    torch._dynamo.reset()
    fn = torch.compile(lambda x: kops.silu_and_mul(x), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="must be even"):
        fn(torch.randn(3, 7))
