"""Module.to("my_asic") / .my_asic() keep parameter identity, as for CUDA.

So weights shared between modules stay shared (GPT-2's lm_head and wte), a
lazy module's UninitializedParameter stays uninitialised, and optimizers built
before the move still hold the model's parameters.
"""

import copy

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.usefixtures("device_count")


class TiedLanguageModel(nn.Module):
    """Embedding and output projection sharing one weight (a tiny GPT-2 head)."""

    def __init__(self, vocab=17, width=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.body = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.body(self.embed(tokens)))


def test_cpu_and_my_asic_tensors_may_swap_data_in_place():
    cpu = torch.ones(2)
    dev = torch.ones(2, device="my_asic")
    assert torch._has_compatible_shallow_copy_type(cpu, dev)
    assert torch._has_compatible_shallow_copy_type(dev, cpu)


def test_other_devices_keep_torchs_answer():
    assert not torch._has_compatible_shallow_copy_type(torch.ones(2), torch.ones(2, device="meta"))
    sparse = torch.ones(2, 2).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(torch.ones(2, 2), sparse)


@pytest.mark.parametrize("move", [lambda m: m.to("my_asic"), lambda m: m.my_asic(), lambda m: m.to("my_asic:1")])
def test_move_keeps_parameter_identity_and_ties(move):
    model = TiedLanguageModel()
    weight = model.embed.weight
    move(model)
    assert model.embed.weight is weight
    assert model.head.weight is model.embed.weight
    assert weight.device.type == "my_asic"
    assert len(list(model.parameters())) == 3  # the tied weight counts once


def test_round_trip_and_dtype_change_keep_ties():
    model = TiedLanguageModel().to("my_asic").cpu().to("my_asic").half()
    assert model.head.weight is model.embed.weight
    assert model.embed.weight.dtype == torch.float16 and model.embed.weight.device.type == "my_asic"


def test_gradient_moves_with_its_parameter():
    model = nn.Linear(3, 2)
    model(torch.randn(4, 3)).sum().backward()
    expected = model.weight.grad.clone()
    weight = model.weight
    model.to("my_asic")
    assert model.weight is weight
    assert model.weight.grad.device.type == "my_asic"
    torch.testing.assert_close(model.weight.grad.cpu(), expected)


def test_optimizer_built_before_the_move_trains_the_moved_model():
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("my_asic")
    before = model.weight.detach().cpu().clone()
    model(torch.ones(2, 3, device="my_asic")).sum().backward()
    opt.step()
    assert not torch.equal(model.weight.detach().cpu(), before)


def test_tied_model_trains_like_cpu():
    torch.manual_seed(0)
    cpu_model = TiedLanguageModel()
    dev_model = copy.deepcopy(cpu_model).to("my_asic")
    tokens = torch.randint(0, 17, (4, 5))
    for model, device in ((cpu_model, "cpu"), (dev_model, "my_asic")):
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            logits = model(tokens.to(device))
            nn.functional.cross_entropy(logits.flatten(0, 1), tokens.to(device).flatten()).backward()
            opt.step()
    assert dev_model.head.weight is dev_model.embed.weight
    for (name, a), b in zip(cpu_model.named_parameters(), dev_model.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), msg=name)


LAZY_MODULES = [
    (lambda: nn.LazyLinear(3), (2, 5)),
    (lambda: nn.LazyConv2d(4, 3), (1, 2, 6, 6)),
    (lambda: nn.LazyConv1d(4, 3), (1, 2, 6)),
    (lambda: nn.LazyBatchNorm1d(), (4, 3)),
]


@pytest.mark.parametrize("how", ["to", "my_asic"])
@pytest.mark.parametrize("make, shape", LAZY_MODULES)
def test_lazy_module_stays_uninitialised_and_then_matches_cpu(make, shape, how):
    torch.manual_seed(0)
    cpu_module = make()
    torch.manual_seed(0)
    dev_module = make()
    dev_module = dev_module.to("my_asic") if how == "to" else dev_module.my_asic()
    assert any(isinstance(p, nn.parameter.UninitializedParameter) for p in dev_module.parameters())
    x = torch.randn(shape)
    torch.manual_seed(1)
    expected = cpu_module(x)
    torch.manual_seed(1)
    got = dev_module(x.to("my_asic"))
    assert got.device.type == "my_asic"
    # Parameters are initialised on each device by its own RNG: compare shapes
    # here, values after copying the CPU module's state.
    assert got.shape == expected.shape
    dev_module.load_state_dict(cpu_module.state_dict())
    torch.testing.assert_close(dev_module(x.to("my_asic")).cpu(), cpu_module(x))
