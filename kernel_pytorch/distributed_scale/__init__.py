"""Scaling jobs over the devices of a machine: device selection and placement across vendors.

See docs/hardware_abstraction.md (the Hardware Abstraction Guide).
"""

from .hardware_adapter import LEGACY_DEVICE_TYPE_ORDER, HardwareAdapter

__all__ = ["HardwareAdapter", "LEGACY_DEVICE_TYPE_ORDER"]
