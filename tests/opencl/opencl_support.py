"""Helpers shared by the OpenCL runtime tests (a module name of its own: tests/runtime has a
conftest.py too, so ``from conftest import`` would be ambiguous when both folders run)."""

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "runtime"))

SOURCE_DIR = REPO_ROOT / "csrc" / "runtime" / "opencl"
OPENCL_ENVIRONMENT_PREFIX = "MY_ASIC_OPENCL_"


def opencl_platform_problem():
    """Why no OpenCL platform can be used here, or None when one can."""
    for name in ("libOpenCL.so.1", "libOpenCL.so"):
        try:
            loader = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return ("no OpenCL ICD loader (libOpenCL.so.1); as root: apt-get install ocl-icd-libopencl1 "
                "pocl-opencl-icd (the README's set-up does it)")
    count = ctypes.c_uint(0)
    status = loader.clGetPlatformIDs(0, None, ctypes.byref(count))
    if status != 0 or count.value == 0:
        return ("the OpenCL loader finds no platform (no ICD in /etc/OpenCL/vendors); as root: "
                "apt-get install pocl-opencl-icd")
    return None


def compile_opencl_runtime(output_path):
    """Builds libkpdr_opencl.so at ``output_path`` as setup.py does."""
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        pytest.skip("no C++ compiler (g++ or $CXX) to build libkpdr_opencl.so; set KP_OPENCL_LIB")
    command = [
        compiler, "-O2", "-std=c++17", "-fPIC", "-shared", "-pthread",
        "-fvisibility=hidden", "-fvisibility-inlines-hidden",
        f"-Wl,--version-script={SOURCE_DIR / 'exports.map'}",
        f"-I{REPO_ROOT / 'csrc' / 'runtime'}",
        *sorted(str(p) for p in SOURCE_DIR.glob("*.cpp")),
        "-ldl", "-o", str(output_path),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    return output_path


def built_library_is_current(path):
    sources = list(SOURCE_DIR.glob("*")) + [REPO_ROOT / "csrc" / "runtime" / "kpdr.h"]
    return path.is_file() and path.stat().st_mtime >= max(p.stat().st_mtime for p in sources)
