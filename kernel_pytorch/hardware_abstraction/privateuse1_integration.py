"""Moved to :mod:`kernel_pytorch.asic.custom_device` (registering a chip belongs with the
device); this path keeps working."""

from kernel_pytorch.asic.custom_device import *  # noqa: F401,F403
from kernel_pytorch.asic.custom_device import __all__  # noqa: F401
