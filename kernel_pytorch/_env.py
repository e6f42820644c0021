"""Environment variables: one prefix rule, and the names it replaced.

``MY_ASIC_*`` configure the my_asic device and its runtimes (registration, the runtime
library, the CPU fallback, the simulated chip); ``KP_*`` configure the kernel library
(ISA, threads, tuning), the build and the test/benchmark tools. docs/environment.md
lists every variable. Old names still work for now, with a DeprecationWarning.
"""

from __future__ import annotations

import os
import warnings
from typing import Optional

__all__ = ["RENAMED", "getenv", "warn_old_names"]

#: old name -> new name. The simulator (csrc/runtime/myasic) falls back to the same old
#: names itself.
RENAMED = {
    f"MYASIC_{key}": f"MY_ASIC_{key}"
    for key in ("DEVICE_COUNT", "MEMORY_MB", "DEVICE_NAMES", "HOST_ADDRESSABLE", "COMPUTE_UNITS",
                "COPY_BANDWIDTH_GBPS")
}
_OLD_NAME = {new: old for old, new in RENAMED.items()}


def getenv(name: str, default: Optional[str] = None) -> Optional[str]:
    """``os.environ[name]``; else the value of its old name, with a DeprecationWarning; else ``default``."""
    value = os.environ.get(name)
    if value is not None:
        return value
    old = _OLD_NAME.get(name)
    if old is None or old not in os.environ:
        return default
    warnings.warn(f"environment variable {old} is deprecated; set {name} instead (docs/environment.md)",
                  DeprecationWarning, stacklevel=2)
    return os.environ[old]


def warn_old_names() -> None:
    """A DeprecationWarning for each old name set without its new one. The device runtime
    reads these variables itself and accepts the old names too (with a note on stderr)."""
    for new in _OLD_NAME:
        getenv(new)
