"""Fixtures that load the reference device runtime ``libmyasic.so``.

The library is the one set-up built in place (``kernel_pytorch/lib/libmyasic.so``, from the
graph in build_support/native.py, per-ISA kernel flags included), unless ``KP_MYASIC_LIB``
names another. Because ``kpdrInit`` configures a process exactly once, every test loads its
own copy of the library under a distinct file name: each ``dlopen`` of a distinct path gets
fresh state.
"""

import os
import shutil
import uuid
from pathlib import Path

import pytest

from kernel_pytorch.asic.conformance.kpdr_ctypes import SUCCESS, KpdrLibrary
from runtime_sources import REPO_ROOT

BUILT_MYASIC = REPO_ROOT / "kernel_pytorch" / "lib" / "libmyasic.so"
_SETTINGS = ("DEVICE_COUNT", "MEMORY_MB", "DEVICE_NAMES", "HOST_ADDRESSABLE", "COMPUTE_UNITS", "COPY_BANDWIDTH_GBPS",
             "OVERCOMMIT")
# The simulator's variables, and their deprecated names it still reads.
MYASIC_ENVIRONMENT_VARIABLES = tuple(f"{prefix}_{name}" for prefix in ("MY_ASIC", "MYASIC") for name in _SETTINGS)


@pytest.fixture(scope="session")
def myasic_library_path():
    """Path of the built libmyasic.so (``$KP_MYASIC_LIB`` or the in-place build)."""
    path = Path(os.environ.get("KP_MYASIC_LIB") or BUILT_MYASIC)
    if not path.is_file():
        pytest.fail(f"{path} does not exist: build it (make setup, or scripts/build_inplace.sh) "
                    "or point KP_MYASIC_LIB at a built libmyasic.so")
    return path


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
