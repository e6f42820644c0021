"""The CUDA ops inside CUDA graphs, under torch.compile, through opcheck, and
their gradients (gradcheck in float64, the fused backward kernels against the
reference's autograd at the storage dtypes)."""

import pytest
import torch
from torch.library import opcheck

import kernel_pytorch.ops as kops
import references as ref
from references import DTYPES, TOL

DEV = "cuda"
ops = torch.ops.kernel_pytorch


def capture(fn):
    """Warms fn up eagerly (tuning happens there), then captures it in a CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def test_a_decoder_step_replays_from_a_cuda_graph_with_new_inputs():
    torch.manual_seed(0)
    x, w = torch.randn(8, 4096, device=DEV, dtype=torch.bfloat16), torch.randn(4096, device=DEV, dtype=torch.bfloat16)
    up = torch.randn(8, 2 * 1024, device=DEV, dtype=torch.bfloat16)
    q = torch.randn(8, 32, 128, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(8, 8, 4096, 128, device=DEV, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lengths = torch.full((8,), 1000, device=DEV, dtype=torch.long)
    wm, xv = torch.randn(512, 4096, device=DEV, dtype=torch.bfloat16), torch.randn(4096, device=DEV, dtype=torch.bfloat16)

    def step():
        return (kops.rms_norm(x, w), kops.silu_and_mul(up), kops.decode_attention(q, k, v, lengths),
                kops.matmul_vec(wm, xv), kops.softmax(x))

    graph, outs = capture(step)
    for new_len in (1, 4096, 2500):
        x.copy_(torch.randn_like(x))
        q.copy_(torch.randn_like(q))
        lengths.fill_(new_len)
        graph.replay()
        torch.cuda.synchronize()
        for got, expected in zip(outs, step()):
            torch.testing.assert_close(got, expected)


def test_capturing_a_shape_never_seen_uses_defaults_and_records_nothing():
    x, w = torch.randn(3, 1234, device=DEV), torch.randn(1234, device=DEV)
    key_part = "cols=1234"
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            out = kops.rms_norm(x, w)
    assert not [e for e in kops.tuning_entries() if key_part in e["shape"] and e["op"] == "rms_norm"]
    graph.replay()
    torch.testing.assert_close(out, ref.rms_norm(x, w, 1e-6).float())


def test_torch_compile_fullgraph_of_a_function_using_the_ops():
    def block(x, r, w, cos, sin, gate_up):
        h, r = kops.fused_add_rms_norm(x, r, w)
        q = kops.apply_rope(h.view(2, 16, 8, 64), cos, sin)
        return q.sum() + kops.silu_and_mul(gate_up).float().sum(), r

    args = (torch.randn(2, 16, 512, device=DEV), torch.randn(2, 16, 512, device=DEV), torch.randn(512, device=DEV),
            torch.randn(16, 32, device=DEV), torch.randn(16, 32, device=DEV), torch.randn(2, 16, 2048, device=DEV))
    compiled = torch.compile(block, fullgraph=True)
    for got, expected in zip(compiled(*args), block(*args)):
        torch.testing.assert_close(got, expected, atol=1e-3, rtol=1e-4)


def opcheck_args(name):
    bf = dict(device=DEV, dtype=torch.bfloat16)
    return dict([
        ("rms_norm", (torch.randn(5, 64, **bf), torch.randn(64, **bf), 1e-6)),
        ("fused_add_rms_norm", (torch.randn(5, 64, **bf), torch.randn(5, 64, **bf), torch.randn(64, **bf), 1e-6)),
        ("silu", (torch.randn(5, 7, **bf),)),
        ("silu_and_mul", (torch.randn(5, 64, **bf),)),
        ("apply_rope", (torch.randn(2, 5, 3, 16, **bf), torch.randn(5, 8, **bf), torch.randn(5, 8, **bf), False)),
        ("softmax", (torch.randn(5, 33, **bf), 0)),
        ("decode_attention", (torch.randn(2, 4, 64, **bf), torch.randn(2, 2, 50, 64, **bf), torch.randn(2, 2, 50, 64, **bf),
                              torch.tensor([50, 7], device=DEV), None)),
        ("prefill_attention", (torch.randn(1, 4, 9, 64, **bf), torch.randn(1, 2, 9, 64, **bf), torch.randn(1, 2, 9, 64, **bf),
                               True, None)),
        ("matmul_vec", (torch.randn(33, 64, **bf), torch.randn(64, **bf))),
        ("rms_norm_backward", (torch.randn(5, 64, **bf), torch.randn(5, 64, **bf), torch.randn(64, **bf), 1e-6)),
        ("silu_and_mul_backward", (torch.randn(5, 32, **bf), torch.randn(5, 64, **bf))),
    ])[name]


OPCHECKED = ["rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul", "apply_rope", "softmax", "decode_attention",
             "prefill_attention", "matmul_vec", "rms_norm_backward", "silu_and_mul_backward"]


@pytest.mark.parametrize("name", OPCHECKED)
def test_opcheck(name):
    # Autograd is checked by gradcheck below (opcheck's needs float64 inputs).
    opcheck(getattr(ops, name), opcheck_args(name), test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def f64(*shape, grad=True):
    return torch.randn(*shape, device=DEV, dtype=torch.float64, requires_grad=grad)


@pytest.mark.parametrize("name", ["rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul", "apply_rope", "softmax",
                                  "prefill_attention", "matmul_vec"])
@pytest.mark.cuda_autograd
def test_gradcheck(name):
    cases = {
        "rms_norm": lambda: (kops.rms_norm, (f64(3, 8), f64(8))),
        "fused_add_rms_norm": lambda: (kops.fused_add_rms_norm, (f64(3, 8), f64(3, 8), f64(8))),
        "silu": lambda: (kops.silu, (f64(3, 5),)),
        "silu_and_mul": lambda: (kops.silu_and_mul, (f64(3, 8),)),
        "apply_rope": lambda: (kops.apply_rope, (f64(1, 3, 2, 4), f64(3, 2), f64(3, 2))),
        "softmax": lambda: (lambda x: kops.softmax(x, 0), (f64(4, 3),)),
        "prefill_attention": lambda: (kops.prefill_attention, (f64(1, 2, 3, 4), f64(1, 1, 5, 4), f64(1, 1, 5, 4))),
        "matmul_vec": lambda: (kops.matmul_vec, (f64(5, 4), f64(4))),
    }
    fn, args = cases[name]()
    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.cuda_autograd
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 7), (64, 4096), (5, 2, 1000)])
def test_rms_norm_backward_kernel_matches_the_reference_gradients(dtype, shape):
    x = torch.randn(*shape, device=DEV).to(dtype).requires_grad_()
    w = torch.randn(shape[-1], device=DEV).to(dtype).requires_grad_()
    g = torch.randn(*shape, device=DEV).to(dtype)
    kops.rms_norm(x, w).backward(g)
    xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref.rms_norm(xd, wd, 1e-6).backward(g.double())
    tol = TOL[dtype]
    torch.testing.assert_close(x.grad.double(), xd.grad, atol=tol["atol"] * 4, rtol=tol["rtol"] * 4)
    # dweight sums over rows: compare relative to its scale.
    scale = wd.grad.abs().max().item()
    torch.testing.assert_close(w.grad.double(), wd.grad, atol=tol["atol"] * 4 * scale, rtol=tol["rtol"] * 4)


@pytest.mark.cuda_autograd
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 14), (64, 2 * 4096), (2, 5, 2 * 333)])
def test_silu_and_mul_backward_kernel_matches_the_reference_gradients(dtype, shape):
    x = (torch.randn(*shape, device=DEV) * 2).to(dtype).requires_grad_()
    g = torch.randn(*shape[:-1], shape[-1] // 2, device=DEV).to(dtype)
    kops.silu_and_mul(x).backward(g)
    xd = x.detach().double().requires_grad_()
    ref.silu_and_mul(xd).backward(g.double())
    tol = TOL[dtype]
    torch.testing.assert_close(x.grad.double(), xd.grad, atol=tol["atol"] * 2, rtol=tol["rtol"] * 2)


@pytest.mark.cuda_autograd
def test_double_backward_still_works_through_the_differentiable_formula():
    x, w = f64(3, 8), f64(8)
    assert torch.autograd.gradgradcheck(kops.rms_norm, (x, w))
