"""scripts/opencl_build_log.py: the OpenCL compiler's view of the runtime's kernels."""

import subprocess
import sys

import pytest

from opencl_support import REPO_ROOT, opencl_platform_problem

SCRIPT = REPO_ROOT / "scripts" / "opencl_build_log.py"


@pytest.fixture(autouse=True)
def _needs_opencl():
    problem = opencl_platform_problem()
    if problem:
        pytest.skip(problem)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO_ROOT.parent)


def test_the_kernel_source_builds_and_its_binary_is_written(tmp_path):
    binary = tmp_path / "kernels.bin"
    result = run("--options", "-DKP_DTYPE=2 -DKP_WG=64", "--binary", str(binary))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clBuildProgram: 0" in result.stdout
    assert binary.stat().st_size > 0


def test_a_failing_build_exits_nonzero_and_prints_the_compiler_log():
    result = run("--options", "-DKP_DTYPE=0 -DKP_WG=64 -DT=int(")
    assert result.returncode == 1
    assert "clBuildProgram: -11" in result.stdout  # CL_BUILD_PROGRAM_FAILURE
    assert "error" in result.stdout.lower()
