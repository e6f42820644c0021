"""torch.compile on my_asic with backends that need no device code generation."""

import pytest
import torch


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_function_matches_eager_cpu(backend):
    fn = torch.compile(lambda x, w: torch.relu(x @ w).sum(dim=0), backend=backend)
    x, w = torch.randn(8, 4), torch.randn(4, 3)
    out = fn(x.to("my_asic"), w.to("my_asic"))
    assert out.device.type == "my_asic"
    torch.testing.assert_close(out.cpu(), torch.relu(x @ w).sum(dim=0))


def test_compiled_training_step_produces_cpu_gradients():
    model = torch.nn.Linear(4, 2)
    reference = torch.nn.Linear(4, 2)
    reference.load_state_dict(model.state_dict())
    model = model.my_asic()
    compiled = torch.compile(model, backend="aot_eager")
    x = torch.randn(5, 4)
    compiled(x.to("my_asic")).square().sum().backward()
    reference(x).square().sum().backward()
    torch.testing.assert_close(model.weight.grad.cpu(), reference.weight.grad)
