"""kernel_pytorch: a PyTorch device extension (``my_asic``) and a Hardware Abstraction Layer.

``import kernel_pytorch`` (or plain ``import torch`` once the package is
installed, through torch's backend autoload) names the PrivateUse1 device
``my_asic`` and registers ``torch.my_asic``. The device runtime loads lazily.
"""

__version__ = "0.1.0"


# Defined before anything imports torch: when ``import kernel_pytorch`` comes
# first, torch's autoload re-enters this half-imported module and looks this
# name up; registration then finishes when the import below returns.
def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: importing us registers my_asic."""


from kernel_pytorch.asic.registration import register_device as _register_device  # noqa: E402

if _register_device():
    from kernel_pytorch.asic.distributed import register_myccl as _register_myccl

    _register_myccl()


def enable_my_asic() -> None:
    """Registers my_asic even though another accelerator (e.g. CUDA) is present.

    See kernel_pytorch.asic.registration.register_device for why that is not
    automatic.
    """
    _register_device(force=True)
