"""The CUDA kernel tests: every test here is marked ``gpu`` and skipped, with the
reason, where there is no CUDA device or the package was built without its
CUDA kernels.

The launch-configuration tuner writes to a cache file: these tests point it
at a temporary file (KP_TUNING_CACHE) so they never touch the user's cache.
"""

import os
import tempfile

import pytest
import torch

_CACHE_DIR = tempfile.mkdtemp(prefix="kp_tuning_")
os.environ.setdefault("KP_TUNING_CACHE", os.path.join(_CACHE_DIR, "tuning.json"))


def _skip_reason():
    if not torch.cuda.is_available():
        return f"needs a CUDA device (torch {torch.__version__}, cuda={torch.version.cuda})"
    import kernel_pytorch.ops as kops

    info = kops.backend_info()["cuda"]
    if info.startswith("not built"):
        return f"kernel_pytorch was built without CUDA kernels: {info}"
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda_autograd: runs PyTorch's autograd engine on CUDA tensors")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    mine = [item for item in items if str(item.path).startswith(here)]
    if not mine:
        return
    reason = _skip_reason()
    # With MY_ASIC_ENABLE=1 beside a GPU, my_asic is torch's current
    # accelerator and PyTorch's autograd engine fails on CUDA tensors (pytorch
    # issue 161129, see kernel_pytorch/asic/registration.py).
    autograd_reason = None
    if reason is None and hasattr(torch, "my_asic"):
        autograd_reason = ("my_asic is torch's current accelerator in this process (MY_ASIC_ENABLE=1), so autograd "
                           "on CUDA tensors fails (pytorch issue 161129); run tests/cuda without MY_ASIC_ENABLE")
    for item in mine:
        item.add_marker(pytest.mark.gpu)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
        elif autograd_reason is not None and item.get_closest_marker("cuda_autograd") is not None:
            item.add_marker(pytest.mark.skip(reason=autograd_reason))
