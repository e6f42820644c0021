"""Recurrent layers on my_asic match the CPU, forward and backward.

For my_asic inputs ATen uses the fused LSTM/GRU cells (as for CUDA), which
csrc/aten/rnn_cells.cpp provides; backward uses their fused backward, and
double backward (create_graph=True) the differentiable formulas.
"""

import copy

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.usefixtures("device_count")

LAYERS = {
    "LSTM": (lambda: nn.LSTM(4, 5, num_layers=2, batch_first=True), (3, 6, 4)),
    "LSTM_bidirectional_no_bias": (lambda: nn.LSTM(4, 5, bidirectional=True, bias=False), (6, 3, 4)),
    "LSTM_projected": (lambda: nn.LSTM(4, 5, proj_size=3), (6, 3, 4)),
    "GRU": (lambda: nn.GRU(4, 5, num_layers=2, batch_first=True), (3, 6, 4)),
    "GRU_unbatched": (lambda: nn.GRU(4, 5), (6, 4)),
    "LSTMCell": (lambda: nn.LSTMCell(4, 5), (3, 4)),
    "LSTMCell_no_bias": (lambda: nn.LSTMCell(4, 5, bias=False), (3, 4)),
    "GRUCell": (lambda: nn.GRUCell(4, 5), (3, 4)),
    "GRUCell_unbatched": (lambda: nn.GRUCell(4, 5), (4,)),
}


def first_output(out):
    return out[0] if isinstance(out, tuple) else out


def run(module, x):
    out = first_output(module(x))
    out.square().sum().backward()
    return out


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_forward_and_backward_match_cpu(name):
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    cpu_module = make()
    dev_module = copy.deepcopy(cpu_module).to("my_asic")
    x = torch.randn(shape, requires_grad=True)
    xd = x.detach().to("my_asic").requires_grad_()
    expected = run(cpu_module, x)
    got = run(dev_module, xd)
    assert got.device.type == "my_asic"
    torch.testing.assert_close(got.cpu(), expected)
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
    for (pname, a), b in zip(cpu_module.named_parameters(), dev_module.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad, msg=pname)


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
def test_double_backward_matches_cpu(name):
    make, shape = LAYERS[name]
    torch.manual_seed(0)
    cpu_module = make()
    dev_module = copy.deepcopy(cpu_module).to("my_asic")
    results = []
    for module, device in ((cpu_module, "cpu"), (dev_module, "my_asic")):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
        (gx,) = torch.autograd.grad(first_output(module(x)).square().sum(), x, create_graph=True)
        (ggx,) = torch.autograd.grad(gx.sum(), x)
        results.append(ggx.cpu())
    torch.testing.assert_close(results[1], results[0])


def test_lstm_cell_with_only_a_cell_state_gradient():
    torch.manual_seed(0)
    cell = nn.LSTMCell(4, 5)
    dev_cell = copy.deepcopy(cell).to("my_asic")
    x = torch.randn(3, 4, requires_grad=True)
    xd = x.detach().to("my_asic").requires_grad_()
    cell(x)[1].sum().backward()
    dev_cell(xd)[1].sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
