"""Ordinary training runs on my_asic's native kernels, without the CPU fallback.

With ``MY_ASIC_FALLBACK=raise`` any op that would fall back raises. The conformance
kit's training models (a CNN, a tiny Llama), an MLP and a small Transformer are built,
initialised and trained for a few steps under it; from the same initial weights and data
the parameters must equal the CPU's. The native kernels are ATen's CPU kernels running on
device memory (host-addressable runtime), so with the same intra-op thread count on both
sides the results are the CPU's to the bit (the tiny Llama's kernel_pytorch ops to rounding).
"""

import copy

import pytest
import torch
import torch.nn as nn

from kernel_pytorch import asic
from kernel_pytorch.asic.conformance import training

pytestmark = pytest.mark.usefixtures("device_count")

STEPS = 3


@pytest.fixture
def one_intra_op_thread():
    previous = training.one_intra_op_thread()
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture
def raise_on_fallback():
    asic.set_fallback_mode("raise")
    try:
        yield
    finally:
        asic.set_fallback_mode("allow")


class TinyTransformer(nn.Module):
    def __init__(self, vocab=50, width=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


CASES = {
    **training.CASES,  # name: (model factory, batch factory, optimizer factory)
    "mlp_sgd": (
        lambda: nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5)),
        lambda g: (torch.randn(16, 20, generator=g), torch.randint(0, 5, (16,), generator=g)),
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    ),
    # SGD: attention's key bias gets gradients that are zero up to rounding, and
    # Adam's normalisation would turn rounding differences into +-lr steps.
    "transformer_sgd": (
        TinyTransformer,
        lambda g: (torch.randint(0, 50, (4, 12), generator=g), torch.randint(0, 50, (4, 12), generator=g)),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trains_like_the_cpu_without_any_fallback(name, raise_on_fallback, one_intra_op_thread):
    make_model, make_batch, make_optimizer = CASES[name]
    torch.manual_seed(0)
    reference = make_model()
    batch = make_batch(torch.Generator().manual_seed(1))
    asic.reset_fallback_stats()

    cpu_model, cpu_losses = training.train(copy.deepcopy(reference), batch, make_optimizer, "cpu", STEPS)
    dev_model, dev_losses = training.train(copy.deepcopy(reference), batch, make_optimizer, "my_asic", STEPS)

    assert asic.fallback_stats() == {}
    assert dev_losses == pytest.approx(cpu_losses, rel=1e-5, abs=1e-6)
    for (pname, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert p_dev.device.type == "my_asic"
        torch.testing.assert_close(p_dev.cpu(), p_cpu, rtol=1e-4, atol=1e-5, msg=f"parameter {pname}")


def test_models_are_built_and_initialised_on_the_device_without_fallback(raise_on_fallback):
    torch.manual_seed(0)
    model = TinyTransformer().to("my_asic")
    nn.init.normal_(model.head.weight, std=0.02)
    nn.init.zeros_(model.head.bias)
    direct = nn.Linear(8, 4, device="my_asic")
    assert direct.weight.device.type == "my_asic"
    assert torch.isfinite(direct.weight).all().item()
    assert asic.fallback_stats() == {}


def test_factories_and_random_ops_run_natively(raise_on_fallback):
    dev = "my_asic"
    assert torch.ones(3, device=dev).sum().item() == 3.0
    assert torch.zeros(2, 2, device=dev).abs().sum().item() == 0.0
    assert torch.full((2,), 7.0, device=dev).tolist() == [7.0, 7.0]
    assert torch.arange(5, device=dev).tolist() == [0, 1, 2, 3, 4]
    torch.manual_seed(3)
    samples = torch.randn(1000, device=dev)
    assert abs(samples.mean().item()) < 0.2
    uniform = torch.rand(1000, device=dev)
    assert ((uniform >= 0) & (uniform < 1)).all().item()
    ints = torch.randint(0, 4, (1000,), device=dev)
    assert ((ints >= 0) & (ints < 4)).all().item()
    assert asic.fallback_stats() == {}


def test_dropout_trains_natively_and_is_reproducible_under_a_seed(raise_on_fallback):
    def run():
        torch.manual_seed(7)
        model = nn.Sequential(nn.Linear(10, 32), nn.Dropout(0.5), nn.Linear(32, 2)).to("my_asic")
        x = torch.randn(8, 10, device="my_asic")
        loss = model(x).square().mean()
        loss.backward()
        return loss.item(), model[0].weight.grad.cpu()

    (loss_a, grad_a), (loss_b, grad_b) = run(), run()
    assert loss_a == loss_b
    torch.testing.assert_close(grad_a, grad_b, rtol=0, atol=0)
    assert asic.fallback_stats() == {}


def test_mixed_dtype_arithmetic_matches_the_cpu_natively(raise_on_fallback):
    # ATen's CPU loops need inputs of one dtype; the CPU iterator casts them
    # first, and my_asic's native kernels must do the same.
    values = torch.tensor([1.5, -2.0, 3.25])
    mask = torch.tensor([True, False, True])
    ints = torch.tensor([3, 4, 7])
    dev = "my_asic"
    cases = {
        "float * python float": (lambda v, m, i: v * 2.5),
        "float * bool mask": (lambda v, m, i: v * m),
        "int / python int": (lambda v, m, i: i / 2),
        "int * python float": (lambda v, m, i: i * 0.5),
        "float compared with int": (lambda v, m, i: v > 1),
        "int compared with float": (lambda v, m, i: i == 3.0),
        "float + int tensor": (lambda v, m, i: v + i),
    }
    for name, fn in cases.items():
        expected = fn(values, mask, ints)
        got = fn(values.to(dev), mask.to(dev), ints.to(dev))
        assert got.device.type == "my_asic", name
        assert got.dtype == expected.dtype, name
        torch.testing.assert_close(got.cpu(), expected, msg=name)
    assert asic.fallback_stats() == {}


def test_in_place_ops_that_cannot_cast_report_the_cpu_error():
    ints = torch.tensor([1, 2], device="my_asic")
    with pytest.raises(RuntimeError, match="can't be cast"):
        ints.mul_(0.5)


def test_native_kernels_are_listed():
    names = asic.native_kernels()
    assert {"add.Tensor", "addmm", "mm", "sum.dim_IntList", "normal_", "nll_loss_forward"} <= set(names)
