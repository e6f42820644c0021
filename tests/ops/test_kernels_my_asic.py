"""The ops on my_asic run the runtime's kernels, equal the reference and never fall back.

In-process tests use the default simulator configuration (host-addressable
device memory, MY_ASIC_HOST_ADDRESSABLE=1); a subprocess runs every case again
with MY_ASIC_HOST_ADDRESSABLE=0 (device memory the host cannot touch, so glue
code that read device pointers on the host would fail there).
"""

import json

import pytest
import torch
import torch.nn.functional as F

from device_subprocess import last_line, run_python
from kernel_cases import DTYPES, HERE_FOR_SUBPROCESS, OPS, all_case_ids, check_case

DTYPE_IDS = [str(d).replace("torch.", "") for d in DTYPES]
CASE_IDS = [f"{o}-{c}" for o, c in all_case_ids()]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op,case", all_case_ids(), ids=CASE_IDS)
def test_op_matches_reference_on_my_asic(op, case, dtype, my_asic):
    problem = check_case(op, case, dtype, my_asic)
    assert problem is None, f"{op}[{case}] {dtype} on my_asic: {problem}"


@pytest.mark.parametrize("op,case", all_case_ids(), ids=CASE_IDS)
def test_op_does_not_fall_back(op, case, my_asic, fallback_counts):
    from kernel_cases import build_case

    args = build_case(op, case, torch.float32, my_asic)
    getattr(torch.ops.kernel_pytorch, op)(*args)
    torch.my_asic.synchronize()
    ours = {k: v for k, v in fallback_counts().items() if k.startswith("kernel_pytorch::")}
    assert ours == {}, f"{op}[{case}] fell back: {ours}"


def test_backend_info_reports_runtime_kernels(my_asic):
    import kernel_pytorch.ops as kops

    assert kops.backend_info()["my_asic"] == "runtime kernels"


def test_kernels_run_in_stream_order_with_copies(my_asic):
    """A kernel enqueued on a side stream sees the copy enqueued before it on that stream."""
    stream = torch.my_asic.Stream()
    host = torch.randn(64, 300)
    w = torch.randn(300).to(my_asic)
    with torch.my_asic.stream(stream):
        x = host.to(my_asic, non_blocking=True)
        out = torch.ops.kernel_pytorch.rms_norm(x, w, 1e-6)
    stream.synchronize()
    from kernel_cases import ref_rms_norm

    torch.testing.assert_close(out.cpu(), ref_rms_norm(host, w.cpu()), atol=2e-5, rtol=2e-5)


def test_op_on_second_device_writes_that_device(my_asic):
    if torch.my_asic.device_count() < 2:
        pytest.skip("needs two my_asic devices")
    x = torch.randn(3, 17, device="my_asic:1")
    out = torch.ops.kernel_pytorch.silu(x)
    assert out.device == torch.device("my_asic:1")
    torch.testing.assert_close(out.cpu(), F.silu(x.cpu()))


SUBPROCESS_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import torch, kernel_pytorch, kernel_pytorch.ops
from kernel_pytorch import asic
from kernel_cases import DTYPES, all_case_ids, check_case_safely as check_case
assert torch.my_asic.get_device_properties(0).host_addressable == {expected}, "configuration not applied"
asic.reset_fallback_stats()
problems = []
for op, case in all_case_ids():
    for dtype in DTYPES:
        problem = check_case(op, case, dtype, "my_asic")
        if problem is not None:
            problems.append(f"{{op}}[{{case}}] {{dtype}}: {{problem}}"[:400])
torch.my_asic.synchronize()
print(json.dumps({{"problems": problems, "fallback": asic.fallback_stats()}}))
"""


def test_every_case_on_device_memory_the_host_cannot_address(my_asic):
    script = SUBPROCESS_SCRIPT.format(here=HERE_FOR_SUBPROCESS, expected=False)
    result = json.loads(last_line(run_python(script, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))
    assert result["problems"] == []
    ours = {k: v for k, v in result["fallback"].items() if k.startswith("kernel_pytorch::")}
    assert ours == {}


def test_every_public_op_has_a_schema():
    names = {s.name.split("::")[1] for s in torch._C._jit_get_all_schemas() if s.name.startswith("kernel_pytorch::")}
    assert set(OPS) <= names


# ------------------------------------------------ standard PyTorch calls (PrivateUse1 overrides)

def _sdpa_inputs(B, H, Hkv, T, S, D, device, dtype=torch.float32):
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, Hkv, S, D), torch.randn(B, Hkv, S, D)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    return (q, k, v), tuple(t.to(device) for t in (q, k, v))


SDPA_CASES = {
    "causal_mha": dict(B=2, H=4, Hkv=4, T=9, S=9, D=16, is_causal=True),
    "non_causal_gqa": dict(B=1, H=8, Hkv=2, T=7, S=7, D=16, is_causal=False),
    "causal_gqa": dict(B=1, H=8, Hkv=2, T=7, S=7, D=16, is_causal=True),
    "decode_one_query": dict(B=2, H=8, Hkv=2, T=1, S=13, D=16, is_causal=False),
    "cross_lengths": dict(B=1, H=2, Hkv=2, T=3, S=11, D=8, is_causal=False),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", sorted(SDPA_CASES))
def test_sdpa_on_my_asic_matches_cpu_and_uses_the_kernels(name, dtype, my_asic, fallback_counts):
    spec = dict(SDPA_CASES[name])
    is_causal = spec.pop("is_causal")
    gqa = spec["H"] != spec["Hkv"]
    host, device = _sdpa_inputs(**spec, device=my_asic, dtype=dtype)
    out = F.scaled_dot_product_attention(*device, is_causal=is_causal, enable_gqa=gqa)
    expected = F.scaled_dot_product_attention(*(t.float() for t in host), is_causal=is_causal, enable_gqa=gqa)
    torch.testing.assert_close(out.cpu().float(), expected, atol=2e-2 if dtype != torch.float32 else 2e-5,
                               rtol=2e-2 if dtype != torch.float32 else 2e-5)
    assert fallback_counts() == {}, "SDPA on my_asic should run the runtime's attention kernels"


def test_sdpa_fused_choice_is_overrideable_for_supported_calls(my_asic):
    from torch.nn.attention import SDPBackend

    _, (q, k, v) = _sdpa_inputs(1, 4, 4, 5, 5, 8, my_asic)
    assert torch._fused_sdp_choice(q, k, v, is_causal=True) == SDPBackend.OVERRIDEABLE.value


def test_sdpa_with_a_mask_still_matches_cpu(my_asic):
    host, device = _sdpa_inputs(1, 2, 2, 5, 5, 8, my_asic)
    mask = torch.rand(5, 5) > 0.3
    mask.fill_diagonal_(True)
    out = F.scaled_dot_product_attention(*device, attn_mask=mask.to(my_asic))
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(*host, attn_mask=mask))


def test_sdpa_backward_on_my_asic_matches_cpu(my_asic):
    host, _ = _sdpa_inputs(1, 4, 2, 6, 6, 8, my_asic)
    leaves_cpu = [t.clone().requires_grad_(True) for t in host]
    leaves_dev = [t.to(my_asic).requires_grad_(True) for t in host]
    F.scaled_dot_product_attention(*leaves_cpu, is_causal=True, enable_gqa=True).square().sum().backward()
    F.scaled_dot_product_attention(*leaves_dev, is_causal=True, enable_gqa=True).square().sum().backward()
    for a, b in zip(leaves_dev, leaves_cpu):
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-4, rtol=1e-4)


def test_sdpa_that_needs_a_gradient_runs_atens_flash_attention_on_device_memory(my_asic, fallback_counts):
    # The runtime's kernels have no backward: training takes ATen's CPU flash
    # attention pair, computing on the host-addressable device memory.
    from torch.nn.attention import SDPBackend

    host, _ = _sdpa_inputs(2, 4, 4, 9, 9, 16, my_asic)
    leaves_cpu = [t.clone().requires_grad_(True) for t in host]
    leaves_dev = [t.to(my_asic).requires_grad_(True) for t in host]
    assert torch._fused_sdp_choice(*leaves_dev, is_causal=True) == SDPBackend.FLASH_ATTENTION.value
    F.scaled_dot_product_attention(*leaves_cpu, is_causal=True).square().sum().backward()
    F.scaled_dot_product_attention(*leaves_dev, is_causal=True).square().sum().backward()
    for a, b in zip(leaves_dev, leaves_cpu):
        assert a.grad.device.type == "my_asic"
        torch.testing.assert_close(a.grad.cpu(), b.grad, atol=1e-5, rtol=1e-5)
    assert fallback_counts() == {}


SDPA_BACKWARD_WITHOUT_HOST_ACCESS = """
import json, torch, kernel_pytorch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend
assert not torch.my_asic.get_device_properties(0).host_addressable, "configuration not applied"
torch.manual_seed(0)
host = [torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)]
leaves_cpu = [t.clone().requires_grad_(True) for t in host]
leaves_dev = [t.to("my_asic").requires_grad_(True) for t in host]
choice = torch._fused_sdp_choice(*leaves_dev, is_causal=True, enable_gqa=True)
F.scaled_dot_product_attention(*leaves_cpu, is_causal=True, enable_gqa=True).square().sum().backward()
F.scaled_dot_product_attention(*leaves_dev, is_causal=True, enable_gqa=True).square().sum().backward()
err = max((a.grad.cpu() - b.grad).abs().max().item() for a, b in zip(leaves_dev, leaves_cpu))
print(json.dumps({"overrideable": choice == SDPBackend.OVERRIDEABLE.value, "max_grad_error": err}))
"""


def test_sdpa_backward_through_the_runtime_kernels_matches_cpu_without_host_access(my_asic):
    # Without host access ATen's CPU kernels cannot run on device memory: the
    # runtime's forward kernel and the recomputing backward serve training.
    result = json.loads(last_line(run_python(SDPA_BACKWARD_WITHOUT_HOST_ACCESS,
                                             env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))
    assert result["overrideable"]
    assert result["max_grad_error"] < 1e-4


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_f_silu_on_my_asic_uses_the_kernel(dtype, my_asic, fallback_counts):
    x = (torch.randn(5, 37) * 3).to(dtype)
    out = F.silu(x.to(my_asic))
    torch.testing.assert_close(out.cpu(), F.silu(x.float()).to(dtype))
    assert fallback_counts() == {}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", [-1, 0])
def test_torch_softmax_on_my_asic_uses_the_kernel(dtype, dim, my_asic, fallback_counts):
    x = (torch.randn(6, 37) * 3).to(dtype)
    out = torch.softmax(x.to(my_asic), dim)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), torch.softmax(x.float(), dim).to(dtype))
    assert fallback_counts() == {}


def test_torch_softmax_with_a_dtype_argument_still_matches_cpu(my_asic):
    x = torch.randn(4, 9).half()
    out = torch.softmax(x.to(my_asic), -1, dtype=torch.float32)
    torch.testing.assert_close(out.cpu(), torch.softmax(x, -1, dtype=torch.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("eps", [None, 1e-5], ids=["default_eps", "eps_1e-5"])
def test_f_rms_norm_on_my_asic_uses_the_kernel(dtype, eps, my_asic, fallback_counts):
    x, w = torch.randn(5, 37).to(dtype), torch.randn(37).to(dtype)
    out = F.rms_norm(x.to(my_asic), (37,), w.to(my_asic), eps)
    expected = F.rms_norm(x.float(), (37,), w.float(), eps if eps is not None else torch.finfo(dtype).eps)
    torch.testing.assert_close(out.cpu(), expected.to(dtype))
    assert fallback_counts() == {}


def test_f_rms_norm_backward_on_my_asic_matches_cpu(my_asic):
    x, w = torch.randn(4, 24), torch.randn(24)
    grads = []
    for device in ("cpu", my_asic):
        xx, ww = x.to(device).detach().requires_grad_(True), w.to(device).detach().requires_grad_(True)
        F.rms_norm(xx, (24,), ww, 1e-6).square().sum().backward()
        grads.append((xx.grad.cpu(), ww.grad.cpu()))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
