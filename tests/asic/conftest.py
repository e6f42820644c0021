"""Fixtures for the my_asic device tests.

Most tests run in the pytest process against the simulated runtime with its
default configuration (two host-addressable devices of 16 GiB); tests that
need another configuration run a script in a subprocess (device_subprocess.py).
"""

import pytest
import torch

import kernel_pytorch  # noqa: F401  (registers torch.my_asic)
from kernel_pytorch import asic


@pytest.fixture(scope="session")
def device_count():
    """Number of my_asic devices in this process; skips the test when there are none."""
    count = torch.my_asic.device_count()
    if count == 0:
        pytest.skip("no my_asic device: the runtime could not be loaded")
    return count


@pytest.fixture(scope="session")
def two_devices(device_count):
    """my_asic:0 and my_asic:1; skips the test on a one-device configuration."""
    if device_count < 2:
        pytest.skip("needs two my_asic devices (MY_ASIC_DEVICE_COUNT >= 2)")
    return torch.device("my_asic", 0), torch.device("my_asic", 1)


@pytest.fixture(scope="session")
def host_addressable(device_count):
    """Skips the test unless device memory is host addressable in this process."""
    if not torch.my_asic.get_device_properties(0).host_addressable:
        pytest.skip("needs host-addressable device memory (MY_ASIC_HOST_ADDRESSABLE=1)")


# Files that test my_asic's registration itself, in subprocesses.
_RUNS_WITHOUT_DEVICE = {"test_accelerator_coexistence.py", "test_custom_device.py"}


def pytest_collection_modifyitems(config, items):
    """Where automatic registration stepped aside for another accelerator (a GPU
    machine), the in-process device tests skip and say how to run them.

    Tests marked slow (the whole op_db sweep, 100-run exit loops) run only
    when asked for: ``pytest -m slow``."""
    if "slow" not in (config.getoption("markexpr") or ""):
        skip_slow = pytest.mark.skip(reason="slow: run with -m slow")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip_slow)
    if hasattr(torch, "my_asic"):
        return
    skip = pytest.mark.skip(
        reason="my_asic not registered in this process (another accelerator is present); "
        "run with MY_ASIC_ENABLE=1 to test it"
    )
    for item in items:
        if item.path.parent.name == "asic" and item.path.name not in _RUNS_WITHOUT_DEVICE:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def restore_device_state():
    """Leaves the current device, stream and fallback mode as the test found them.

    Also waits for outstanding device work, so one test's async copies cannot
    leak into the next test's observations.
    """
    if not hasattr(torch, "my_asic") or torch.my_asic.device_count() == 0:  # tests skip themselves
        yield
        return
    device = torch.my_asic.current_device()
    stream = torch.my_asic.current_stream()
    mode = asic.get_fallback_mode()
    yield
    torch.my_asic.synchronize(device)
    torch.my_asic.set_stream(stream)
    torch.my_asic.set_device(device)
    asic.set_fallback_mode(mode)


@pytest.fixture
def fallback_counts():
    """Fallback counters starting from zero; returns a function reading them."""
    asic.reset_fallback_stats()
    return asic.fallback_stats
