"""Fixtures for the kernel_pytorch.ops tests.

tests/ops is not a package: the helpers it shares with tests/asic
(device_subprocess.py, a fresh interpreter per device configuration) are put
on sys.path here, next to this directory's own kernel_cases.py.
"""

import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent / "asic"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import kernel_pytorch  # noqa: E402,F401  (registers my_asic and the ops)
import kernel_pytorch.ops as kops  # noqa: E402

ISA_LEVELS = ("generic", "avx2", "avx512", "avx512_bf16", "amx")


@pytest.fixture(params=ISA_LEVELS)
def cpu_isa(request):
    """Runs the test with the CPU kernels forced to one ISA level; skips levels this CPU lacks.

    The level goes back to "auto" afterwards.
    """
    try:
        kops.set_cpu_isa(request.param)
    except ValueError as error:
        pytest.skip(f"this CPU cannot run {request.param}: {error}")
    try:
        yield request.param
    finally:
        kops.set_cpu_isa("auto")


@pytest.fixture(scope="session")
def my_asic():
    """The my_asic device (in-process, default runtime configuration); skips without one."""
    if not hasattr(torch, "my_asic"):
        pytest.skip("my_asic is not registered in this process (another accelerator is present; "
                    "run with MY_ASIC_ENABLE=1)")
    if torch.my_asic.device_count() == 0:
        pytest.skip("no my_asic device: the runtime could not be loaded")
    return torch.device("my_asic", 0)


@pytest.fixture
def fallback_counts(my_asic):
    """Fallback counters starting from zero; returns a function reading them."""
    from kernel_pytorch import asic

    torch.my_asic.synchronize()
    asic.reset_fallback_stats()
    return asic.fallback_stats


@pytest.fixture(autouse=True)
def _seed_and_sync():
    """Fixed RNG seed per test; waits for outstanding my_asic work afterwards."""
    torch.manual_seed(0)
    yield
    if hasattr(torch, "my_asic") and torch.my_asic.device_count() > 0 and torch.my_asic.is_initialized():
        torch.my_asic.synchronize()
