"""Environment variables: ``MY_ASIC_*`` configure the my_asic device and its runtimes,
``KP_*`` the kernel library, the build and the tools (docs/environment.md)."""

from __future__ import annotations

import os
import warnings
from typing import Optional

#: old name -> new name. The simulator (csrc/runtime/myasic) falls back to the old names itself.
RENAMED = {f"MYASIC_{key}": f"MY_ASIC_{key}" for key in (
    "DEVICE_COUNT", "MEMORY_MB", "DEVICE_NAMES", "HOST_ADDRESSABLE", "COMPUTE_UNITS", "COPY_BANDWIDTH_GBPS")}
_OLD_NAME = {new: old for old, new in RENAMED.items()}


def getenv(name: str, default: Optional[str] = None) -> Optional[str]:
    """``os.environ[name]``; else its old name's value, with a DeprecationWarning; else ``default``."""
    old = _OLD_NAME.get(name)
    if old is not None and name not in os.environ and old in os.environ:
        warnings.warn(f"environment variable {old} is deprecated; set {name} instead (docs/environment.md)",
                      DeprecationWarning, stacklevel=2)
        return os.environ[old]
    return os.environ.get(name, default)


def warn_old_names() -> None:
    """A DeprecationWarning for each old name set without its new one (the device runtime,
    which reads these itself, accepts the old names too, with a note on stderr)."""
    for new in _OLD_NAME:
        getenv(new)
