"""Conjugate and negative views of my_asic tensors materialise correctly.

Materialising one used to recurse without end (a SIGSEGV), so every case runs
in its own interpreter, in both memory modes: a crash fails that test only.
"""

import pytest

from device_subprocess import last_line, run_python

MEMORY_MODES = {"host_addressable": "1", "not_host_addressable": "0"}

PRELUDE = """
import torch, kernel_pytorch
torch.manual_seed(0)
x = torch.randn(5, dtype=torch.complex64)
d = x.to("my_asic")
"""


def run_case(body, mode):
    return last_line(run_python(PRELUDE + body, env={"MY_ASIC_HOST_ADDRESSABLE": MEMORY_MODES[mode]}))


@pytest.fixture(params=sorted(MEMORY_MODES))
def mode(request):
    return request.param


def test_conjugate_view_copies_to_cpu(mode):
    assert run_case("print(torch.equal(d.conj().cpu(), x.conj()))", mode) == "True"


def test_conjugate_view_prints(mode):
    out = run_case("print(repr(d.conj()) == repr(x.conj()).replace(')', \", device='my_asic:0')\"))", mode)
    assert out == "True"


def test_resolve_conj_gives_the_conjugate_on_the_device(mode):
    body = """
r = d.conj().resolve_conj()
print(r.device.type, r.is_conj(), torch.equal(r.cpu(), x.conj().resolve_conj()))
"""
    assert run_case(body, mode) == "my_asic False True"


def test_negative_view_materialises(mode):
    body = "print(torch.equal(torch._neg_view(d).cpu(), -x), torch.equal(d.conj().neg().cpu(), -x.conj()))"
    assert run_case(body, mode) == "True True"


def test_copy_into_a_conjugate_view_writes_the_conjugate(mode):
    body = """
dev = torch.zeros(5, dtype=torch.complex64, device="my_asic")
dev.conj().copy_(x)
host = torch.zeros(5, dtype=torch.complex64)
host.conj().copy_(d)
same_device = torch.empty(5, dtype=torch.complex64, device="my_asic")
same_device.copy_(d.conj())
print(torch.equal(dev.cpu(), x.conj()), torch.equal(host, x.conj()), torch.equal(same_device.cpu(), x.conj()))
"""
    assert run_case(body, mode) == "True True True"


@pytest.mark.parametrize("fn", ["ifft", "hfft", "ihfft", "hfft2", "hfftn", "ihfftn"])
def test_fft_of_a_real_tensor_matches_cpu(fn, mode):
    body = f"""
r = torch.randn(4, 6)
got = torch.fft.{fn}(r.to("my_asic"))
print(got.device.type, torch.allclose(got.cpu(), torch.fft.{fn}(r), atol=1e-5))
"""
    assert run_case(body, mode) == "my_asic True"


def test_matmul_with_conjugate_transpose_matches_cpu(mode):
    # mm takes conj views as they are; the fallback's host alias must keep the bit.
    body = """
y = torch.randn(4, 4, dtype=torch.complex64)
dy = y.to("my_asic")
print(torch.allclose((dy.mH @ dy).cpu(), y.mH @ y, atol=1e-5),
      torch.allclose((dy.conj() @ dy).cpu(), y.conj() @ y, atol=1e-5),
      torch.allclose((torch._neg_view(dy) @ dy).cpu(), torch._neg_view(y) @ y, atol=1e-5),
      torch.allclose(torch.vdot(dy[0], dy[1]).cpu(), torch.vdot(y[0], y[1]), atol=1e-5))
"""
    assert run_case(body, mode) == "True True True True"
