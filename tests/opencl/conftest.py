"""Fixtures for the OpenCL kpdr runtime (``libkpdr_opencl.so``).

The library is the one setup.py built into ``kernel_pytorch/lib`` (or ``$KP_OPENCL_LIB``),
else it is compiled once per session with setup.py's command. Tests need an OpenCL
platform: PoCL on CPUs (``apt-get install ocl-icd-libopencl1 pocl-opencl-icd`` as root,
done by the README's set-up), or a GPU driver; without one they skip with the reason.
Every test loads its own copy of the library, because ``kpdrInit`` configures a process
(a loaded copy) exactly once.
"""

import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "runtime"))

from kernel_pytorch.asic.conformance.kpdr_ctypes import SUCCESS, KpdrLibrary  # noqa: E402
from opencl_support import (  # noqa: E402
    OPENCL_ENVIRONMENT_PREFIX,
    REPO_ROOT,
    built_library_is_current,
    compile_opencl_runtime,
    opencl_platform_problem,
)


@pytest.fixture(scope="session")
def opencl_library_path(tmp_path_factory):
    """Path of a built libkpdr_opencl.so; skips the test without an OpenCL platform."""
    problem = opencl_platform_problem()
    if problem:
        pytest.skip(problem)
    prebuilt = os.environ.get("KP_OPENCL_LIB")
    if prebuilt:
        if not Path(prebuilt).is_file():
            pytest.fail(f"KP_OPENCL_LIB={prebuilt!r} does not exist; unset it or build the library")
        return Path(prebuilt)
    bundled = REPO_ROOT / "kernel_pytorch" / "lib" / "libkpdr_opencl.so"
    if built_library_is_current(bundled):
        return bundled
    return compile_opencl_runtime(tmp_path_factory.mktemp("opencl") / "libkpdr_opencl.so")


@pytest.fixture
def clean_opencl_environment(monkeypatch):
    """Removes MY_ASIC_OPENCL_* variables so the developer's shell cannot change configs."""
    for name in list(os.environ):
        if name.startswith(OPENCL_ENVIRONMENT_PREFIX):
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def load_uninitialized_opencl(opencl_library_path, tmp_path, clean_opencl_environment):
    """Factory: a fresh, not yet initialised copy of libkpdr_opencl.so."""

    def load():
        copy_path = tmp_path / f"libkpdr_opencl-{uuid.uuid4().hex}.so"
        shutil.copyfile(opencl_library_path, copy_path)
        return KpdrLibrary(copy_path)

    return load


@pytest.fixture
def load_opencl(load_uninitialized_opencl, tmp_path):
    """Factory: a fresh copy initialised with ``options`` (kernel cache under tmp_path)."""

    def load(options=""):
        runtime = load_uninitialized_opencl()
        full = f"cache_dir={tmp_path / 'kernel-cache'};{options}"
        code = runtime.kpdrInit(full.encode())
        assert code == SUCCESS, runtime.last_error_message()
        return runtime

    return load


@pytest.fixture
def opencl(load_opencl):
    """libkpdr_opencl.so initialised with the default configuration."""
    return load_opencl()
