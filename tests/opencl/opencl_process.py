"""Running a script in a fresh process whose my_asic device is an OpenCL device.

The runtime is chosen once per process (MY_ASIC_RUNTIME=opencl), so every
torch-level OpenCL test runs its script through :func:`run_on_opencl`; a crash
fails that one test, loudly.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from opencl_support import REPO_ROOT, opencl_platform_problem

TIMEOUT_S = 600


def skip_without_opencl_device():
    problem = opencl_platform_problem()
    if problem:
        pytest.skip(problem)
    if not (REPO_ROOT / "kernel_pytorch" / "lib" / "libkpdr_opencl.so").is_file():
        pytest.skip("kernel_pytorch/lib/libkpdr_opencl.so is not built; run the in-place build first")


def run_on_opencl_process(code, options="", env=None, cwd=None):
    """Runs ``code`` with my_asic on the OpenCL runtime; returns the CompletedProcess."""
    skip_without_opencl_device()
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("MY_ASIC_", "MYASIC_")) and k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    environment["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [
        p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p])
    environment["MY_ASIC_RUNTIME"] = "opencl"
    # The platform picked by default (GPUs first) unless the caller filters.
    environment["MY_ASIC_RUNTIME_OPTIONS"] = options
    environment["MY_ASIC_ENABLE"] = "1"
    # Compiled kernels are shared by the test processes (PoCL compiles slowly), not
    # written to the user's ~/.cache.
    environment["MY_ASIC_OPENCL_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "kernel_pytorch-opencl-tests")
    environment.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                          cwd=cwd or "/", capture_output=True, text=True, timeout=TIMEOUT_S)


def run_on_opencl(code, options="", env=None):
    """Like :func:`run_on_opencl_process`; fails the test (with stderr) on a non-zero exit."""
    done = run_on_opencl_process(code, options, env)
    if done.returncode != 0:
        pytest.fail(f"subprocess exited with status {done.returncode}\n--- stdout ---\n{done.stdout}\n"
                    f"--- stderr ---\n{done.stderr[-6000:]}", pytrace=False)
    return done.stdout
