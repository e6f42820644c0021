"""Names PrivateUse1 ``my_asic`` and installs ``torch.my_asic`` (idempotent)."""

import logging
import os
import warnings
from typing import Optional

import torch

logger = logging.getLogger(__name__)

DEVICE_NAME = "my_asic"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED_RUNTIME_DIR = os.path.join(_PACKAGE_DIR, "lib")
BUNDLED_RUNTIME = os.path.join(BUNDLED_RUNTIME_DIR, "libmyasic.so")
#: Short names of the runtimes shipped in ``lib/`` (``MY_ASIC_RUNTIME=opencl``).
BUNDLED_RUNTIMES = {
    "myasic": "libmyasic.so",      # the simulator (default)
    "simulator": "libmyasic.so",
    "opencl": "libkpdr_opencl.so",  # any OpenCL device: PoCL on CPUs, NVIDIA/AMD/Intel GPUs
}


def runtime_library(name: str) -> str:
    """The library file for a runtime given by short name, file name or path.

    ``"opencl"`` and ``"myasic"`` name the bundled runtimes; a bare file name such
    as ``"libkpdr_opencl.so"`` is looked up in the bundled ``lib/`` first (then by the
    system loader); anything with a path separator is used as given.
    """
    name = BUNDLED_RUNTIMES.get(name.strip().lower(), name.strip()) if name.strip() else "libmyasic.so"
    if os.sep not in name and os.path.isfile(os.path.join(BUNDLED_RUNTIME_DIR, name)):
        return os.path.join(BUNDLED_RUNTIME_DIR, name)
    return name


def select_runtime(runtime: str, options: str = "") -> str:
    """Chooses the kpdr runtime (and its kpdrInit options) my_asic will use.

    Call before the device is first used in the process; the environment
    equivalent is ``MY_ASIC_RUNTIME=opencl MY_ASIC_RUNTIME_OPTIONS="platform=NVIDIA"``.
    Example: ``select_runtime("opencl", "device_type=gpu")`` makes the first OpenCL
    GPU the my_asic device.

    Returns:
        The library path that will be loaded.

    Raises:
        RuntimeError: the device is already initialised with another runtime.
    """
    from kernel_pytorch import _C

    path = runtime_library(runtime)
    _C._set_runtime(path, options)
    return path


def claim_privateuse1(name: str = DEVICE_NAME) -> None:
    """Renames PrivateUse1 to ``name``, failing clearly if another name holds it."""
    current = torch._C._get_privateuse1_backend_name()
    if current == name:
        return
    if current != "privateuseone":
        raise RuntimeError(
            f"PrivateUse1 is already registered as '{current}' in this process, so it cannot "
            f"become '{name}'. PyTorch allows one PrivateUse1 backend per process: use "
            f"device_name='{current}', or don't load the other backend (set "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 to stop automatic loading)."
        )
    torch.utils.rename_privateuse1_backend(name)


def other_accelerator() -> Optional[str]:
    """The accelerator torch would use if my_asic were not registered, or None.

    Naming PrivateUse1 makes it torch's current accelerator
    (torch.accelerator), and PyTorch's autograd engine then mishandles the
    streams of CUDA tensors ("opt_ready_stream && opt_parent_stream" assert,
    pytorch issue 161129). So my_asic must not take over silently where a real
    accelerator is present.
    """
    if torch._C._get_privateuse1_backend_name() != "privateuseone":
        return None  # PrivateUse1 already named: the accelerator is settled
    try:
        device_type = torch.accelerator.current_accelerator(check_available=True)
    except TypeError:  # torch without check_available
        device_type = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    return None if device_type is None else device_type.type


def _allow_on_uninitialized_parameters(method) -> None:
    """Lets ``Tensor.my_asic()`` run on a lazy module's UninitializedParameter.

    UninitializedParameter refuses every torch function but a list of
    device/dtype moves (Tensor.cuda, .cpu, .to, ...), so
    ``LazyLinear(3).my_asic()`` would fail where ``.cuda()`` works. Moving it
    keeps it uninitialised, as for CUDA.
    """
    allowed = torch.nn.parameter.UninitializedTensorMixin._allowed_methods
    if method not in allowed:
        allowed.append(method)


def register_device(force: bool = False) -> bool:
    """Makes my_asic a full torch device: name, module, Tensor/Module methods.

    Automatic registration (``import kernel_pytorch``, torch's backend autoload)
    steps aside when another accelerator is available, so CUDA/XPU training in
    the same environment keeps working; ``MY_ASIC_ENABLE=1``, ``force=True`` or
    register_custom_device() registers anyway (with a warning), and
    ``MY_ASIC_ENABLE=0`` never registers automatically.

    Returns:
        True when my_asic is registered after the call.
    """
    from kernel_pytorch import _C, _env, asic

    if not force:
        setting = _env.getenv("MY_ASIC_ENABLE", "")
        if setting == "0":
            return False
        if setting != "1":
            other = other_accelerator()
            if other is not None:
                logger.info(
                    "my_asic not registered: torch already has the '%s' accelerator. Set MY_ASIC_ENABLE=1 "
                    "or call kernel_pytorch.enable_my_asic() to use my_asic beside it.", other)
                return False
    other = other_accelerator()
    if other is not None:
        warnings.warn(
            f"my_asic becomes torch's current accelerator instead of '{other}'. PyTorch's autograd "
            f"engine then fails on {other} tensors (pytorch issue 161129): use {other} and my_asic in "
            f"separate processes.",
            RuntimeWarning,
            stacklevel=2,
        )
    claim_privateuse1(DEVICE_NAME)
    if not hasattr(torch, DEVICE_NAME):
        torch._register_device_module(DEVICE_NAME, asic)
    from kernel_pytorch.asic import serialization

    serialization.register()
    if not hasattr(torch.Tensor, "is_" + DEVICE_NAME):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
        _allow_on_uninitialized_parameters(getattr(torch.Tensor, DEVICE_NAME))
    from kernel_pytorch.asic import compile_registration

    compile_registration.install()  # lazy: torch._dynamo/_inductor are not imported here
    from kernel_pytorch.asic._exit import register_exit_hook

    register_exit_hook()
    _env.warn_old_names()  # the runtime reads its MY_ASIC_* settings itself, at first use
    if not _C._runtime_library():
        # The default runtime (MY_ASIC_RUNTIME: a short name such as "opencl", a file
        # name or a path); register_custom_device or select_runtime may still replace it.
        _C._set_runtime(runtime_library(_env.getenv("MY_ASIC_RUNTIME", "")),
                        _env.getenv("MY_ASIC_RUNTIME_OPTIONS", ""))
    return True
