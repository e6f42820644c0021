"""Where this checkout keeps the kpdr ABI header and the runtimes' sources, for tests.

The ctypes bindings themselves live in the package
(:mod:`kernel_pytorch.asic.conformance.kpdr_ctypes`), which the conformance kit uses
on installed copies too; what only a source checkout has is here.
"""

import re
import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME_INCLUDE_DIR = REPO_ROOT / "csrc" / "runtime"
KPDR_HEADER = RUNTIME_INCLUDE_DIR / "kpdr.h"
TINY_RUNTIME_SOURCE = Path(__file__).resolve().parent / "tiny_runtime" / "tiny_runtime.c"


def header_function_names(header=KPDR_HEADER):
    """Names of every function the header marks ``KPDR_API`` (the ABI, in header order)."""
    text = Path(header).read_text()
    return re.findall(r"^KPDR_API\b[^(]*?\b(kpdr\w+)\s*\(", text, flags=re.MULTILINE)


def build_tiny_runtime(output):
    """Compiles tests/runtime/tiny_runtime into ``output``; None without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-pthread", "-I", str(RUNTIME_INCLUDE_DIR),
         str(TINY_RUNTIME_SOURCE), "-lm", "-o", str(output)],
        check=True,
    )  # fmt: skip
    return Path(output)
