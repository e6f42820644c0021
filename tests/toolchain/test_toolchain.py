"""setup.py's toolchain checks (build_support/toolchain.py), and the built
libraries: neither the extension nor libmyasic.so may carry a private copy of
the C++ runtime.

The broken compiler is a fake (a shell script answering -print-file-name the
way a toolchain without libstdc++.so does): it is the boundary we cannot
install here.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from build_support import toolchain  # noqa: E402

SYSTEM_CXX = next((c for c in ("/usr/bin/g++", "/usr/bin/c++") if os.path.exists(c)), None)
needs_system_cxx = pytest.mark.skipif(SYSTEM_CXX is None, reason="needs /usr/bin/g++")


def fake_compiler(tmp_path, answer):
    """A compiler that answers `-print-file-name=libstdc++.so` with `answer`."""
    path = tmp_path / "fake-g++"
    path.write_text(f'#!/bin/sh\ncase "$1" in -print-file-name=*) echo "{answer}";; *) exit 1;; esac\n')
    path.chmod(0o755)
    return str(path)


def test_a_compiler_without_libstdcxx_so_is_reported(tmp_path):
    problem = toolchain.libstdcxx_problem(fake_compiler(tmp_path, "libstdc++.so"))
    assert problem is not None and "libstdc++.so" in problem and "static copy" in problem


def test_a_compiler_whose_libstdcxx_so_link_is_dangling_is_reported(tmp_path):
    dangling = tmp_path / "libstdc++.so"
    dangling.symlink_to(tmp_path / "missing.so.6")
    assert toolchain.libstdcxx_problem(fake_compiler(tmp_path, str(dangling))) is not None


@needs_system_cxx
def test_the_system_compiler_links_libstdcxx_dynamically():
    assert toolchain.libstdcxx_problem(SYSTEM_CXX) is None


@needs_system_cxx
def test_a_broken_cxx_is_replaced_by_a_working_compiler(tmp_path):
    broken = fake_compiler(tmp_path, "libstdc++.so")
    cxx, note = toolchain.choose_cxx({"CXX": broken}, fallbacks=(str(tmp_path / "absent"), SYSTEM_CXX))
    assert cxx == SYSTEM_CXX
    assert broken in note and SYSTEM_CXX in note


def test_the_build_stops_with_the_compiler_the_problem_and_the_fix_when_nothing_works(tmp_path):
    broken = fake_compiler(tmp_path, "libstdc++.so")
    with pytest.raises(toolchain.ToolchainError) as err:
        toolchain.choose_cxx({"CXX": broken}, fallbacks=(str(tmp_path / "absent"),))
    message = str(err.value)
    assert broken in message and "static copy of libstdc++" in message and "CXX=/usr/bin/g++" in message


@needs_system_cxx
def test_a_working_cxx_is_kept_without_a_note():
    assert toolchain.choose_cxx({"CXX": SYSTEM_CXX}) == (SYSTEM_CXX, None)


def test_the_c_compiler_of_the_replacement_toolchain_is_found_beside_it(tmp_path):
    for cxx, cc in (("g++", "gcc"), ("g++-12", "gcc-12"), ("clang++", "clang"), ("c++", "cc")):
        (tmp_path / cc).write_text("#!/bin/sh\n")
        (tmp_path / cc).chmod(0o755)
        assert toolchain.matching_c_compiler(str(tmp_path / cxx)) == str(tmp_path / cc)


def test_no_c_compiler_is_named_when_the_toolchain_has_none(tmp_path):
    assert toolchain.matching_c_compiler(str(tmp_path / "g++")) is None
    assert toolchain.matching_c_compiler(str(tmp_path / "icpx")) is None


@needs_system_cxx
def test_the_setup_moves_cc_with_a_replaced_cxx(tmp_path):
    """nvcc compiles host code with $CC: a replaced $CXX must not leave it on the broken toolchain."""
    system_cc = toolchain.matching_c_compiler(SYSTEM_CXX)
    if system_cc is None:
        pytest.skip(f"no C compiler beside {SYSTEM_CXX}")
    broken = fake_compiler(tmp_path, "libstdc++.so")
    env = dict(os.environ, CXX=broken, CC=str(tmp_path / "fake-gcc"), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    # setup.py's own --name prints the project name after configuring the compilers, building nothing.
    out = subprocess.run([sys.executable, "-c",
                          "import os, runpy, sys; sys.argv = ['setup.py', '--name']; "
                          "runpy.run_path('setup.py', run_name='__main__'); "
                          "print('CXX=' + os.environ['CXX'], 'CC=' + os.environ['CC'])"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"CXX={SYSTEM_CXX} CC={system_cc}" in out.stdout
    assert f"CC={system_cc}" in out.stderr and broken in out.stderr


def test_cuda_is_built_only_with_a_cuda_torch_and_nvcc(tmp_path):
    nvcc_home = tmp_path / "cuda"
    (nvcc_home / "bin").mkdir(parents=True)
    (nvcc_home / "bin" / "nvcc").write_text("")
    assert toolchain.cuda_build_decision(None, str(nvcc_home), {})[:2] == (False, 1)
    assert toolchain.cuda_build_decision("13.0", None, {})[:2] == (False, 2)
    assert toolchain.cuda_build_decision("13.0", str(tmp_path / "nowhere"), {})[:2] == (False, 2)
    assert toolchain.cuda_build_decision("13.0", str(nvcc_home), {"KP_BUILD_CUDA": "0"})[:2] == (False, 3)
    assert toolchain.cuda_build_decision("13.0", str(nvcc_home), {})[:2] == (True, 0)


def test_the_default_arch_list_is_the_visible_gpus_else_ampere_to_hopper():
    assert toolchain.default_cuda_arch_list([(9, 0), (9, 0)]) == "9.0"
    assert toolchain.default_cuda_arch_list([]) == "8.0;8.6;8.9;9.0+PTX"


# ------------------------------------------------------------------ the built libraries

def built_libraries():
    import kernel_pytorch

    ext = Path(kernel_pytorch._C.__file__)
    return [ext, ext.parent / "lib" / "libmyasic.so"]


@pytest.mark.skipif(shutil.which("readelf") is None or shutil.which("nm") is None, reason="needs binutils")
@pytest.mark.parametrize("index", [0, 1], ids=["_C", "libmyasic.so"])
def test_the_library_links_the_shared_cxx_runtime_and_carries_no_copy_of_it(index):
    lib = built_libraries()[index]
    assert lib.exists(), f"{lib} was not built"
    dynamic = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "libstdc++.so" in dynamic, f"{lib.name} does not link libstdc++.so dynamically"
    # Functions only libstdc++/libsupc++ define: with a static copy they are defined here.
    symbols = subprocess.run(["nm", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    symbols += subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    private = [s for s in ("__cxa_throw", "__cxa_begin_catch", "_ZSt9terminatev", "__gxx_personality_v0")
               if any(line.split()[-1] == s for line in symbols.splitlines() if line.split())]
    assert not private, f"{lib.name} defines C++ runtime symbols {private} (a static libstdc++ copy)"
