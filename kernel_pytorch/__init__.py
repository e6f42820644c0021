"""kernel_pytorch: a PyTorch device extension (``my_asic``) and a Hardware Abstraction Layer.

``import kernel_pytorch`` (or plain ``import torch`` once the package is
installed, through torch's backend autoload) names the PrivateUse1 device
``my_asic`` and registers ``torch.my_asic``. The device runtime loads lazily.
"""

__version__ = "0.1.0"

from kernel_pytorch.asic.registration import register_device as _register_device

_register_device()


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: importing us registers my_asic."""
