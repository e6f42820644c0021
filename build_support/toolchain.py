"""Choosing the C++ compiler and the CUDA build of kernel_pytorch (used by build_support/native.py).

A compiler whose ``libstdc++.so`` cannot be found (a broken toolchain install,
some conda and wrapper compilers) silently links ``libstdc++.a`` into every
shared library it builds. The extension then carries a private copy of the
C++ runtime next to torch's, and the first C++ exception that crosses between
them (any error raised from the extension) can crash the process. So the
build checks the compiler before using it, and picks a working one or stops
with a message naming the compiler, the problem and the fix.
"""

import os
import shlex
import shutil
import subprocess
from typing import List, Mapping, Optional, Tuple

# Compilers tried, in order, when the configured one would link libstdc++ statically.
FALLBACK_COMPILERS = ("/usr/bin/g++", "/usr/bin/c++", "/usr/bin/clang++")

# Built when TORCH_CUDA_ARCH_LIST is unset and no GPU is visible at build time:
# Ampere, Ada and Hopper SASS, plus Hopper PTX that newer GPUs JIT-compile.
DEFAULT_CUDA_ARCH_LIST = "8.0;8.6;8.9;9.0+PTX"


class ToolchainError(RuntimeError):
    """The build cannot go on with this toolchain; the message says why and what to do."""


def libstdcxx_problem(cxx: str) -> Optional[str]:
    """Why ``cxx`` would link libstdc++ statically into a shared library, or None if it would not.

    Asks the compiler where its ``libstdc++.so`` is (``-print-file-name``): a
    compiler that can link it dynamically answers with an existing path; one
    that cannot answers with the bare name. A compiler that cannot be run, or
    does not understand the option, is not judged here (None).
    """
    argv = shlex.split(cxx)
    if not argv or shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv + ["-print-file-name=libstdc++.so"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    answer = out.stdout.strip()
    if os.path.isabs(answer) and os.path.exists(answer):
        return None
    return (
        f"`{cxx} -print-file-name=libstdc++.so` answers {answer!r}, not an existing file, so it would "
        "link a private static copy of libstdc++ into the extension (which crashes on the first C++ "
        "exception it raises)"
    )


def choose_cxx(env: Mapping[str, str], fallbacks: Tuple[str, ...] = FALLBACK_COMPILERS) -> Tuple[str, Optional[str]]:
    """The C++ compiler to build with, and a one-line note when it replaces the configured one.

    The configured compiler is ``$CXX`` (default ``c++``). When it would link
    libstdc++ statically, the first working compiler of ``fallbacks`` is used
    instead; when none works, raises ToolchainError.
    """
    cxx = env.get("CXX") or "c++"
    problem = libstdcxx_problem(cxx)
    if problem is None:
        return cxx, None
    for candidate in fallbacks:
        if os.path.exists(candidate) and os.access(candidate, os.X_OK) and libstdcxx_problem(candidate) is None:
            return candidate, f"kernel_pytorch: not building with CXX={cxx}: {problem}; using {candidate} instead"
    raise ToolchainError(
        f"kernel_pytorch: cannot build with the C++ compiler {cxx}: {problem}. Fix: point CXX at a compiler "
        f"whose libstdc++.so exists (e.g. CXX=/usr/bin/g++ pip install ...), or repair this toolchain's "
        f"libstdc++.so link. Tried instead: {', '.join(fallbacks)}."
    )


def matching_c_compiler(cxx: str) -> Optional[str]:
    """The C compiler of the toolchain ``cxx`` belongs to (``/usr/bin/g++`` -> ``/usr/bin/gcc``), or None.

    When setup.py replaces a broken ``$CXX``, ``$CC`` must move with it: nvcc
    compiles the CUDA sources' host code with ``$CC`` (torch passes it as
    ``-ccbin``), and objects built against one toolchain's libstdc++ headers
    are then linked against the other's library.
    """
    directory, name = os.path.split(cxx)
    for cxx_name, c_name in (("clang++", "clang"), ("g++", "gcc"), ("c++", "cc")):
        if cxx_name in name:
            candidate = os.path.join(directory, name.replace(cxx_name, c_name, 1))
            if os.path.exists(candidate) and os.access(candidate, os.X_OK):
                return candidate
            return None
    return None


def cuda_build_decision(torch_cuda_version: Optional[str], cuda_home: Optional[str],
                        env: Mapping[str, str]) -> Tuple[bool, int, str]:
    """Whether to compile the CUDA kernels: (build, reason code, one-line explanation).

    Reason codes (compiled into the extension for ``backend_info()``): 0 built,
    1 torch is not a CUDA build, 2 nvcc not found, 3 disabled with KP_BUILD_CUDA=0.
    """
    if env.get("KP_BUILD_CUDA", "").strip().lower() in ("0", "off", "false", "no"):
        return False, 3, "kernel_pytorch: KP_BUILD_CUDA=0: building without the CUDA kernels"
    if not torch_cuda_version:
        return False, 1, "kernel_pytorch: torch is not a CUDA build: building the CPU-only package (no CUDA kernels)"
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else None
    if nvcc is None or not os.path.exists(nvcc):
        return False, 2, ("kernel_pytorch: nvcc not found (set CUDA_HOME to the CUDA toolkit): building the "
                          "CPU-only package (no CUDA kernels)")
    return True, 0, f"kernel_pytorch: building the CUDA kernels with {nvcc}"


def default_cuda_arch_list(visible_capabilities: List[Tuple[int, int]]) -> str:
    """TORCH_CUDA_ARCH_LIST for a build that did not set one: the visible GPUs, else DEFAULT_CUDA_ARCH_LIST."""
    if visible_capabilities:
        return ";".join(sorted({f"{major}.{minor}" for major, minor in visible_capabilities}))
    return DEFAULT_CUDA_ARCH_LIST
