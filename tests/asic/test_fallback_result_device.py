"""Ops with my_asic inputs (or device="my_asic") return my_asic tensors in both
memory modes, even when the CPU kernel's first tensor argument is a CPU scalar
or there is no tensor argument at all."""

import pytest

from device_subprocess import last_line, run_python


@pytest.mark.parametrize("addressable", ["1", "0"])
def test_factory_through_the_fallback_lands_on_my_asic(addressable):
    out = run_python(
        """
        import torch, kernel_pytorch
        print(torch._efficientzerotensor(3, device="my_asic").device)
        """,
        env={"MY_ASIC_HOST_ADDRESSABLE": addressable},
    )
    assert last_line(out) == "my_asic:0"


@pytest.mark.parametrize("addressable", ["1", "0"])
def test_sign_backward_gives_a_my_asic_gradient(addressable):
    out = run_python(
        """
        import torch, kernel_pytorch
        x = torch.randn(5, device="my_asic", requires_grad=True)
        (g,) = torch.autograd.grad(x.sgn().sum(), x)
        print(g.device, torch.count_nonzero(g.cpu()).item())
        """,
        env={"MY_ASIC_HOST_ADDRESSABLE": addressable},
    )
    assert last_line(out) == "my_asic:0 0"
