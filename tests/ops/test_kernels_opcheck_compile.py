"""Dispatcher hygiene: torch.library.opcheck for every op, torch.compile(fullgraph=True) and torch.export."""

import pytest
import torch

import kernel_pytorch.ops as kops
from kernel_cases import OPS, build_case

# One representative case per op, and whether its inputs can take gradients.
OPCHECK_CASES = {
    "rms_norm": ("width_17", True),
    "fused_add_rms_norm": ("width_17", True),
    "silu": ("three_dims", True),
    "silu_and_mul": ("three_dims_d_19", True),
    "apply_rope": ("interleaved_per_batch_tables", True),
    "softmax": ("middle_dim", True),
    "decode_attention": ("lengths", False),
    "prefill_attention": ("chunk_causal_5_of_12", True),
    "matmul_vec": ("33_by_47", True),
}


def _opcheck_args(op, device, requires_grad):
    case, differentiable = OPCHECK_CASES[op]
    args = build_case(op, case, torch.float32, device)
    if requires_grad and differentiable:
        args = tuple(a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point()
                     else a for a in args)
    return args


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("op", OPS)
def test_opcheck_on_cpu(op, requires_grad):
    if requires_grad and not OPCHECK_CASES[op][1]:
        pytest.skip(f"{op} has no backward formula")
    torch.library.opcheck(getattr(torch.ops.kernel_pytorch, op).default, _opcheck_args(op, "cpu", requires_grad))


BACKWARD_OPS = {
    "rms_norm_backward": lambda device: (torch.randn(3, 17, device=device), torch.randn(3, 17, device=device),
                                         torch.randn(17, device=device), 1e-6),
    "silu_and_mul_backward": lambda device: (torch.randn(3, 9, device=device), torch.randn(3, 18, device=device)),
}


@pytest.mark.parametrize("op", sorted(BACKWARD_OPS))
def test_opcheck_backward_ops_on_cpu(op):
    torch.library.opcheck(getattr(torch.ops.kernel_pytorch, op).default, BACKWARD_OPS[op]("cpu"))


# PyTorch's test_autograd_registration raises NotImplementedError for any device but
# CPU/CUDA/XPU ("NYI devices other than CPU/CUDA/XPU"), so on my_asic it is left out; the
# registration it checks is device independent (register_autograd) and is covered on cpu.
MY_ASIC_OPCHECKS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


@pytest.mark.parametrize("op", OPS)
def test_opcheck_on_my_asic(op, my_asic):
    torch.library.opcheck(getattr(torch.ops.kernel_pytorch, op).default, _opcheck_args(op, my_asic, True),
                          test_utils=MY_ASIC_OPCHECKS)


@pytest.mark.parametrize("op", sorted(BACKWARD_OPS))
def test_opcheck_backward_ops_on_my_asic(op, my_asic):
    torch.library.opcheck(getattr(torch.ops.kernel_pytorch, op).default, BACKWARD_OPS[op](my_asic),
                          test_utils=MY_ASIC_OPCHECKS)


def test_opcheck_autograd_registration_is_not_implemented_by_pytorch_for_my_asic(my_asic):
    """Documents the PyTorch limitation above; if this starts passing, add the check back."""
    with pytest.raises(Exception, match="NYI devices other than CPU/CUDA/XPU"):
        torch.library.opcheck(torch.ops.kernel_pytorch.silu.default, _opcheck_args("silu", my_asic, True),
                              test_utils=("test_autograd_registration",))


def _block(x, residual, w, cos, sin, w_out):
    """A decoder-ish function touching several ops: norm, rope, attention, SwiGLU, softmax, matvec."""
    h, residual = kops.fused_add_rms_norm(x, residual, w)
    b, t, hidden = h.shape
    q = kops.apply_rope(h.view(b, t, 4, hidden // 4), cos, sin)
    attn = kops.prefill_attention(q.transpose(1, 2), q.transpose(1, 2)[:, :2], q.transpose(1, 2)[:, :2], True)
    y = kops.silu_and_mul(attn.transpose(1, 2).reshape(b, t, hidden))
    probs = kops.softmax(kops.rms_norm(y, w[: hidden // 2]), -1)
    return kops.matmul_vec(w_out, probs[0, -1]), residual


def _block_inputs(device="cpu", requires_grad=False):
    hidden, t = 32, 5
    tensors = [torch.randn(1, t, hidden), torch.randn(1, t, hidden), torch.randn(hidden),
               torch.randn(t, hidden // 8), torch.randn(t, hidden // 8), torch.randn(7, hidden // 2)]
    return [x.to(device).requires_grad_(requires_grad) for x in tensors]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_function_with_several_ops_matches_eager(backend):
    torch._dynamo.reset()
    inputs = _block_inputs()
    compiled = torch.compile(_block, backend=backend, fullgraph=True)
    for a, b in zip(compiled(*inputs), _block(*inputs)):
        torch.testing.assert_close(a, b)


@pytest.mark.slow
def test_inductor_compiles_the_ops_on_cpu():
    torch._dynamo.reset()
    inputs = _block_inputs()
    compiled = torch.compile(_block, fullgraph=True)
    for a, b in zip(compiled(*inputs), _block(*inputs)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_inductor_compiles_one_op_with_surrounding_pointwise_code():
    """Inductor keeps the custom op as an extern call and fuses the torch code around it."""
    torch._dynamo.reset()

    def fn(x, w):
        return kops.rms_norm(x * 2 + 1, w).relu()

    x, w = torch.randn(4, 24), torch.randn(24)
    torch.testing.assert_close(torch.compile(fn, fullgraph=True)(x, w), fn(x, w))


def test_compiled_training_step_matches_eager_gradients():
    torch._dynamo.reset()
    eager_inputs = _block_inputs(requires_grad=True)
    compiled_inputs = [x.detach().clone().requires_grad_(True) for x in eager_inputs]
    compiled = torch.compile(_block, backend="aot_eager", fullgraph=True)
    out, res = compiled(*compiled_inputs)
    (out.sum() + res.sum()).backward()
    out, res = _block(*eager_inputs)
    (out.sum() + res.sum()).backward()
    for a, b in zip(compiled_inputs, eager_inputs):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def test_compiled_function_on_my_asic(my_asic, fallback_counts):
    torch._dynamo.reset()
    inputs = _block_inputs()
    compiled = torch.compile(_block, backend="aot_eager", fullgraph=True)
    out = compiled(*(x.to(my_asic) for x in inputs))
    for a, b in zip(out, _block(*inputs)):
        assert a.device.type == "my_asic"
        torch.testing.assert_close(a.cpu(), b, atol=1e-5, rtol=1e-5)
    ours = {k: v for k, v in fallback_counts().items() if k.startswith("kernel_pytorch::")}
    assert ours == {}


def test_compile_with_dynamic_shapes_does_not_recompile_per_length():
    torch._dynamo.reset()
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    fn = torch.compile(lambda x, w: kops.silu_and_mul(kops.rms_norm(x, w)), backend=counter, dynamic=True, fullgraph=True)
    w = torch.randn(16)
    for rows in (3, 5, 9):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(fn(x, w), kops.silu_and_mul(kops.rms_norm(x, w)))
    assert counter.frame_count == 1


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = kops.RMSNorm(32)
        self.mlp = kops.SwiGLUMLP(32, 48)
        self.rope = kops.RotaryEmbedding(8, max_positions=16)

    def forward(self, x, residual, positions):
        h, residual = self.norm(x, residual)
        q = self.rope(h.view(h.shape[0], h.shape[1], 4, 8), positions)
        attn = kops.prefill_attention(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2), True)
        return self.mlp(attn.transpose(1, 2).reshape(h.shape)), residual


def test_export_of_a_module_using_the_ops_runs_and_names_them():
    module = _Block().eval()
    args = (torch.randn(2, 5, 32), torch.randn(2, 5, 32), torch.arange(5))
    exported = torch.export.export(module, args)
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    for name in ("fused_add_rms_norm", "apply_rope", "prefill_attention", "silu_and_mul"):
        assert f"kernel_pytorch.{name}.default" in targets, f"{name} missing from {sorted(targets)}"
    for a, b in zip(exported.module()(*args), module(*args)):
        torch.testing.assert_close(a, b)


def test_export_with_a_dynamic_sequence_length():
    module = _Block().eval()
    args = (torch.randn(1, 6, 32), torch.randn(1, 6, 32), torch.arange(6))
    seq = torch.export.Dim("seq", min=2, max=16)
    exported = torch.export.export(module, args, dynamic_shapes=({1: seq}, {1: seq}, {0: seq}))
    args3 = (torch.randn(1, 3, 32), torch.randn(1, 3, 32), torch.arange(3))
    for a, b in zip(exported.module()(*args3), module(*args3)):
        torch.testing.assert_close(a, b)
