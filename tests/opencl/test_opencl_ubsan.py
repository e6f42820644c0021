"""The OpenCL runtime's host code under UndefinedBehaviorSanitizer.

Undefined behaviour in a runtime shows up on some compilers only: a reduction over empty
slices divided by a chunk of 0 elements, which this machine's g++ build survived and the
GPU machine's build turned into a SIGFPE (72 op_db items crashed there). This builds
libkpdr_opencl.so with -fsanitize=undefined and runs the ABI-level OpenCL tests (every
entry against numpy, the runtime's memory, stream and copy checks) against it in a child
pytest, which stops at the first report (with the empty-slice bug put back, this test
fails). The enum check is off: the ABI is C, where an enum field is an int any caller may
fill, and GCC and Clang assume no narrower range unless -fstrict-enums (the entries reject
unknown values themselves).
"""

import os
import shutil
import subprocess
import sys

import pytest

from opencl_support import REPO_ROOT, SOURCE_DIR, opencl_platform_problem

SELECTION = "test_opencl_runtime or through_the_abi or empty_slices or split_column or match_numpy"


@pytest.fixture(scope="module")
def sanitized_runtime(tmp_path_factory):
    """(library, libubsan path): libkpdr_opencl.so built with -fsanitize=undefined."""
    problem = opencl_platform_problem()
    if problem:
        pytest.skip(problem)
    compiler = shutil.which(os.environ.get("CXX", "g++"))
    if compiler is None:
        pytest.skip("no C++ compiler to build the sanitized runtime")
    found = subprocess.run([compiler, "-print-file-name=libubsan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(found) or not os.path.isfile(found):
        pytest.skip(f"{compiler} has no libubsan.so (as root: apt-get install libubsan1)")
    library = tmp_path_factory.mktemp("ubsan") / "libkpdr_opencl.so"
    command = [compiler, "-O1", "-g", "-std=c++17", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden",
               "-fvisibility-inlines-hidden", "-fsanitize=undefined", "-fno-sanitize=enum",
               "-fno-sanitize-recover=undefined", f"-Wl,--version-script={SOURCE_DIR / 'exports.map'}",
               f"-I{REPO_ROOT / 'csrc' / 'runtime'}", *sorted(str(p) for p in SOURCE_DIR.glob("*.cpp")),
               "-ldl", "-o", str(library)]  # fmt: skip
    built = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    return library, found


def test_the_abi_level_tests_run_clean_under_ubsan(sanitized_runtime, tmp_path):
    library, libubsan = sanitized_runtime
    log = tmp_path / "ubsan"
    env = dict(os.environ, KP_OPENCL_LIB=str(library), LD_PRELOAD=libubsan,
               UBSAN_OPTIONS=f"halt_on_error=1:print_stacktrace=1:log_path={log}")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                          str(REPO_ROOT / "tests" / "opencl"), "-k", SELECTION],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    reports = "".join(p.read_text() for p in tmp_path.glob("ubsan*"))
    assert run.returncode == 0 and not reports, (reports or "")[-4000:] + run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
