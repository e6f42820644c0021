"""my_asic beside a real accelerator: it must not break CUDA training.

Naming PrivateUse1 makes it torch's current accelerator, and the autograd
engine then fails on CUDA tensors (pytorch issue 161129), so automatic
registration steps aside when another accelerator is available.
"""

import pytest
import torch

from device_subprocess import run_python

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_my_asic_enable_0_keeps_import_from_registering_the_device():
    out = run_python(
        "import torch, kernel_pytorch; print(hasattr(torch, 'my_asic'), torch._C._get_privateuse1_backend_name())",
        env={"MY_ASIC_ENABLE": "0"},
    )
    assert out.split() == ["False", "privateuseone"]


def test_enable_my_asic_registers_after_an_opt_out():
    out = run_python(
        "import torch, kernel_pytorch; kernel_pytorch.enable_my_asic(); print(torch.ones(2, device='my_asic').sum().item())",
        env={"MY_ASIC_ENABLE": "0"},
    )
    assert out.strip() == "2.0"


@pytest.mark.gpu
@cuda_only
def test_importing_kernel_pytorch_keeps_cuda_autograd_working():
    out = run_python(
        "import torch, kernel_pytorch\n"
        "x = torch.randn(32, 32, device='cuda', requires_grad=True); (x @ x).sum().backward()\n"
        "print(hasattr(torch, 'my_asic'), torch.accelerator.current_accelerator().type, x.grad.shape[0])",
        env={"MY_ASIC_ENABLE": ""},  # automatic registration, whatever the caller set
    )
    assert out.split() == ["False", "cuda", "32"]
