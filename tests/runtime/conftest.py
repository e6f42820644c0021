"""Fixtures that build and load the reference device runtime ``libmyasic.so``.

The library is compiled once per test session from ``csrc/runtime/myasic`` with the same
command setup.py uses, unless ``KP_MYASIC_LIB`` names an already built one. Because
``kpdrInit`` configures a process exactly once, every test loads its own copy of the
library under a distinct file name: each ``dlopen`` of a distinct path gets fresh state.
"""

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kpdr_ctypes import REPO_ROOT, RUNTIME_INCLUDE_DIR, SUCCESS, TINY_RUNTIME_SOURCE, KpdrLibrary

MYASIC_SOURCE_DIR = RUNTIME_INCLUDE_DIR / "myasic"
# The CPU kernel library the simulator runs as its device kernels.
KERNEL_SOURCE_DIR = REPO_ROOT / "csrc" / "kernels" / "cpu"
_SETTINGS = ("DEVICE_COUNT", "MEMORY_MB", "DEVICE_NAMES", "HOST_ADDRESSABLE", "COMPUTE_UNITS", "COPY_BANDWIDTH_GBPS",
             "OVERCOMMIT")
# The simulator's variables, and their deprecated names it still reads.
MYASIC_ENVIRONMENT_VARIABLES = tuple(f"{prefix}_{name}" for prefix in ("MY_ASIC", "MYASIC") for name in _SETTINGS)


def compile_myasic(output_path):
    """Builds libmyasic.so at ``output_path`` exactly as setup.py does."""
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        pytest.skip("no C++ compiler (g++ or $CXX) to build libmyasic.so; set KP_MYASIC_LIB")
    command = [
        compiler, "-O2", "-std=c++17", "-fPIC", "-shared", "-pthread",
        "-fvisibility=hidden", "-fvisibility-inlines-hidden",
        f"-Wl,--version-script={MYASIC_SOURCE_DIR / 'exports.map'}",
        f"-I{RUNTIME_INCLUDE_DIR}", f"-I{REPO_ROOT / 'csrc'}",
        *sorted(str(p) for p in MYASIC_SOURCE_DIR.glob("*.cpp")),
        *sorted(str(p) for p in KERNEL_SOURCE_DIR.glob("*.cpp")),
        "-o", str(output_path),
    ]  # fmt: skip
    subprocess.run(command, check=True)
    return output_path


@pytest.fixture(scope="session")
def myasic_library_path(tmp_path_factory):
    """Path of a built libmyasic.so (``$KP_MYASIC_LIB`` or freshly compiled)."""
    prebuilt = os.environ.get("KP_MYASIC_LIB")
    if prebuilt:
        if not Path(prebuilt).is_file():
            pytest.fail(f"KP_MYASIC_LIB={prebuilt!r} does not exist; unset it or build the library")
        return Path(prebuilt)
    return compile_myasic(tmp_path_factory.mktemp("myasic") / "libmyasic.so")


@pytest.fixture
def clean_myasic_environment(monkeypatch):
    """Removes MY_ASIC_* (and old MYASIC_*) variables so the developer's shell cannot change test configs."""
    for name in MYASIC_ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def load_uninitialized_myasic(myasic_library_path, tmp_path, clean_myasic_environment):
    """Factory: a fresh, not yet initialised copy of libmyasic.so."""

    def load():
        copy_path = tmp_path / f"libmyasic-{uuid.uuid4().hex}.so"
        shutil.copyfile(myasic_library_path, copy_path)
        return KpdrLibrary(copy_path)

    return load


@pytest.fixture
def load_myasic(load_uninitialized_myasic, clean_myasic_environment):
    """Factory: a fresh copy of libmyasic.so initialised with ``options`` and ``env``."""

    def load(options=None, env=None):
        for name, value in (env or {}).items():
            clean_myasic_environment.setenv(name, value)
        runtime = load_uninitialized_myasic()
        code = runtime.kpdrInit(options.encode() if options is not None else None)
        assert code == SUCCESS, runtime.last_error_message()
        return runtime

    return load


# Two 16 GiB devices whatever the host: the memory tests' figures stay fixed. Capacity
# beyond the host's memory is only accounting here (mmap'd without reserve, never touched).
FIXED_16_GIB = "memory_mb=16384;overcommit=1"


@pytest.fixture
def myasic(load_myasic):
    """libmyasic.so initialised with the default configuration but a fixed 16 GiB capacity
    per device (``FIXED_16_GIB``; the default capacity depends on the host's memory)."""
    return load_myasic(options=FIXED_16_GIB)
