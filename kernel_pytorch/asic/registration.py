"""Names PrivateUse1 ``my_asic`` and installs ``torch.my_asic`` (idempotent)."""

import os

import torch

DEVICE_NAME = "my_asic"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED_RUNTIME_DIR = os.path.join(_PACKAGE_DIR, "lib")
BUNDLED_RUNTIME = os.path.join(BUNDLED_RUNTIME_DIR, "libmyasic.so")


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


def register_device() -> None:
    """Makes my_asic a full torch device: name, module, Tensor/Module methods."""
    from kernel_pytorch import _C, asic

    claim_privateuse1(DEVICE_NAME)
    if not hasattr(torch, DEVICE_NAME):
        torch._register_device_module(DEVICE_NAME, asic)
    if not hasattr(torch.Tensor, "is_" + DEVICE_NAME):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )
    if not _C._runtime_library():
        # The default runtime; register_custom_device may still replace it.
        _C._set_runtime(os.environ.get("MY_ASIC_RUNTIME", BUNDLED_RUNTIME), "")
