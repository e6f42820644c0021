"""Autograd and optimizers on my_asic give the CPU's results.

A small conv + MLP model is trained for a few steps on the CPU and, from the
same initial weights and data, on my_asic; the parameters must agree. Each
optimizer variant (foreach on/off, AdamW's decoupled weight decay) is a
separate code path in torch.optim, so each gets its own test.
"""

import copy

import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.usefixtures("device_count")

STEPS = 3


def _model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 16),
        nn.LayerNorm(16),
        nn.Tanh(),
        nn.Linear(16, 3),
    )


def _batch():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(8, 1, 6, 6, generator=gen), torch.randint(0, 3, (8,), generator=gen)


def _train(model, make_optimizer, device):
    model = model.to(device)
    optimizer = make_optimizer(model.parameters())
    inputs, targets = (t.to(device) for t in _batch())
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return model


OPTIMIZERS = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd_foreach": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, foreach=False),
    "adam_foreach": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, foreach=False),
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, foreach=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_steps_match_cpu(name):
    initial = _model()
    on_cpu = _train(copy.deepcopy(initial), OPTIMIZERS[name], "cpu")
    on_device = _train(copy.deepcopy(initial), OPTIMIZERS[name], "my_asic")
    for (param_name, expected), actual in zip(on_cpu.named_parameters(), on_device.parameters()):
        assert actual.device.type == "my_asic"
        torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-5, msg=lambda m: f"{param_name}: {m}")


def test_gradients_match_cpu_and_live_on_device():
    model = _model()
    inputs, targets = _batch()
    nn.functional.cross_entropy(model(inputs), targets).backward()
    device_model = _model().to("my_asic")
    nn.functional.cross_entropy(device_model(inputs.to("my_asic")), targets.to("my_asic")).backward()
    for expected, actual in zip(model.parameters(), device_model.parameters()):
        assert actual.grad.device.type == "my_asic"
        torch.testing.assert_close(actual.grad.cpu(), expected.grad, rtol=1e-4, atol=1e-6)


def test_backward_through_cross_device_copy_reaches_source(two_devices):
    leaf = torch.ones(3, device=two_devices[0], requires_grad=True)
    (leaf.to(two_devices[1]) * 2).sum().backward()
    assert leaf.grad.device == two_devices[0]
    assert leaf.grad.cpu().tolist() == [2.0, 2.0, 2.0]
