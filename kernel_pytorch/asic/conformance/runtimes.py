"""Which kpdr runtime the conformance kit tests, and how its subprocesses load it.

A runtime is named by path (``/opt/yourchip/libyourchip.so``) or by the short name of a
library bundled with kernel_pytorch (``myasic``, the simulator; ``opencl``, the OpenCL
runtime where it was built). Every part of the kit runs in child processes that load
the runtime the way a user does: ``MY_ASIC_RUNTIME`` names the library,
``MY_ASIC_RUNTIME_OPTIONS`` carries the option string for ``kpdrInit``, and
``MY_ASIC_ENABLE=1`` registers my_asic even beside another accelerator (a GPU machine).
"""

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

# The short names are registration's (MY_ASIC_RUNTIME=opencl means the same library).
from kernel_pytorch.asic.registration import BUNDLED_RUNTIME_DIR, BUNDLED_RUNTIMES


class RuntimeNotFound(ValueError):
    """The runtime named on the command line is neither a file nor a bundled runtime."""


@dataclass(frozen=True)
class RuntimeUnderTest:
    """A runtime library and the option string its ``kpdrInit`` gets."""

    name: str  # as the user gave it (short name or path)
    path: Path  # the library file
    options: str = ""

    @property
    def label(self) -> str:
        """``name`` plus the options, for reports (``myasic [host_addressable=0]``)."""
        return f"{self.name} [{self.options}]" if self.options else self.name

    def environment(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """The environment of a child process that tests this runtime.

        Ours, with the runtime selected, and with kernel_pytorch importable from where
        this process imported it (a source checkout on PYTHONPATH works like an install).
        """
        env = dict(os.environ)
        env["MY_ASIC_RUNTIME"] = str(self.path)
        env["MY_ASIC_RUNTIME_OPTIONS"] = self.options
        env["MY_ASIC_ENABLE"] = "1"
        env.pop("MY_ASIC_FALLBACK", None)  # a "raise" from the caller's shell would fail every op
        package_parent = str(Path(__file__).resolve().parents[3])
        path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([package_parent] + [p for p in path if p != package_parent])
        # The ABI checks load copies of the library from a temporary directory: its own
        # directory stays on the search path for libraries it links by $ORIGIN.
        library_path = [str(self.path.parent)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(library_path)
        env.update(extra or {})
        return env


def resolve_runtime(spec: str, options: str = "") -> RuntimeUnderTest:
    """The runtime ``spec`` names: a path to a library, or a bundled short name.

    Raises:
        RuntimeNotFound: naming what was looked for and how to fix it.
    """
    if not spec:
        raise RuntimeNotFound("no runtime given: pass a library path or one of " + ", ".join(sorted(BUNDLED_RUNTIMES)))
    candidate = Path(spec).expanduser()
    if candidate.is_file():
        return RuntimeUnderTest(spec, candidate.resolve(), options)
    if spec.strip().lower() in BUNDLED_RUNTIMES:
        bundled = Path(BUNDLED_RUNTIME_DIR) / BUNDLED_RUNTIMES[spec.strip().lower()]
        if bundled.is_file():
            return RuntimeUnderTest(spec, bundled, options)
        raise RuntimeNotFound(
            f"the bundled runtime {spec!r} ({bundled}) is not built: build kernel_pytorch "
            f"(`make setup` or `python setup.py build_ext --inplace`) or pass the library's path"
        )
    if os.sep in spec or spec.endswith(".so"):
        raise RuntimeNotFound(f"runtime library {spec!r} does not exist: check the path")
    raise RuntimeNotFound(
        f"unknown runtime {spec!r}: pass a path to a kpdr runtime library (.so) or one of "
        + ", ".join(sorted(BUNDLED_RUNTIMES))
    )


def python_command(module: Optional[str]):
    """``[python, -m, module]`` for a child process of the kit (``-P`` keeps its cwd off
    sys.path); ``[python]`` plus the flag for ``module=None``."""
    flags = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *flags] + (["-m", module] if module else [])
