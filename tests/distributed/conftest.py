"""Fixtures for the torch.distributed tests: real process groups of 2 and 4
ranks, each a fresh process (ranks.py), on the simulated my_asic."""

import pytest
import torch

import kernel_pytorch  # noqa: F401


def pytest_collection_modifyitems(config, items):
    """Skips every test here when my_asic or torch.distributed is unavailable."""
    import torch.distributed as dist

    reason = None
    if not hasattr(torch, "my_asic"):
        reason = "my_asic not registered in this process (another accelerator is present); run with MY_ASIC_ENABLE=1"
    elif not (dist.is_available() and dist.is_gloo_available()):
        reason = "this torch has no torch.distributed with gloo"
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "tests/distributed" in str(item.fspath):
            item.add_marker(skip)
