"""Scaling jobs over the devices of a machine: device selection and placement across vendors.

See docs/hardware_abstraction.md (the Hardware Abstraction Guide).
"""

from .hardware_adapter import HardwareAdapter

__all__ = ["HardwareAdapter"]
