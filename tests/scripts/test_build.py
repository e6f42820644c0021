"""The native build (build_support/native.py) and the set-up script (scripts/setup.sh).

The graph tests build a miniature tree (a few one-line sources laid out like csrc/) with the
real compiler and ninja, so they check what a developer sees: what an edit rebuilds.
"""

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
from build_support import native  # noqa: E402

CXX = shutil.which("g++") or shutil.which("c++")
X86 = platform.machine().lower() in ("x86_64", "amd64")
needs_cxx = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
needs_ninja = pytest.mark.skipif(shutil.which("ninja") is None, reason="needs ninja")
needs_x86 = pytest.mark.skipif(not X86, reason="per-ISA flags exist on x86-64 only")


def config(**overrides):
    """A configuration without torch: the extension is an ordinary shared library here."""
    cfg = dict(cxx=CXX or "c++", torch_free="-O0 -fPIC -Icsrc -Icsrc/runtime", ext="-O0 -fPIC -Icsrc",
               ext_link="", ext_name="kernel_pytorch/_C.so", isa=X86, cuda=False, python=sys.executable,
               graph_inputs=[])
    return dict(cfg, **overrides)


MINI_TREE = {
    "setup.py": "",
    "build_support/native.py": "",
    "build_support/toolchain.py": "",
    "csrc/aten/glue.h": "inline int glue() { return 1; }\n",
    "csrc/aten/glue.cpp": '#include "aten/glue.h"\nint use_glue() { return glue(); }\n',
    "csrc/kernels/cpu/family_a.h": "inline int family_a() { return 2; }\n",
    "csrc/kernels/cpu/family_b.h": "inline int family_b() { return 3; }\n",
    "csrc/kernels/cpu/isa.cpp": '#include "kernels/cpu/family_a.h"\nint isa() { return family_a(); }\n',
    # Fails to compile unless the build really passes the ISA's flags.
    "csrc/kernels/cpu/kernels_avx2.cpp": ('#include "kernels/cpu/family_b.h"\n#ifndef __AVX2__\n'
                                          '#error "not compiled with -mavx2"\n#endif\nint avx2() { return family_b(); }\n'),
    "csrc/runtime/myasic/runtime.cpp": 'extern "C" int kpdrAnswer() { return 42; }\nint hidden() { return 0; }\n',
    "csrc/runtime/myasic/exports.map": "{ global: kpdr*; local: *; };\n",
    "csrc/runtime/opencl/runtime.cpp": 'extern "C" int kpdrOpenCL() { return 7; }\n',
}


@pytest.fixture
def tree(tmp_path):
    for relative, text in MINI_TREE.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    edges = native.graph(str(tmp_path), config())
    native.write_ninja(str(tmp_path), edges, config())
    return tmp_path, edges


def ninja(root, *args):
    result = subprocess.run(["ninja", "-f", native.GRAPH, *args], cwd=root, capture_output=True, text=True,
                            env=dict(os.environ, NINJA_STATUS=native.NINJA_STATUS))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def touch_later(path):
    later = path.stat().st_mtime + 10
    os.utime(path, (later, later))


def edges_by_output(root=REPO_ROOT, **overrides):
    return {e.output: e for e in native.graph(str(root), config(**overrides))}


@needs_x86
def test_each_per_isa_kernel_file_is_compiled_with_its_isa_flags():
    edges = edges_by_output()
    kernels = {os.path.basename(e.inputs[0]): e.cmd for e in edges.values() if e.inputs[0].startswith("csrc/kernels/cpu/")}
    assert "-mavx512bf16" in kernels["kernels_avx512_bf16.cpp"]
    assert "-mavx512f" in kernels["kernels_avx512.cpp"] and "-mavx512bf16" not in kernels["kernels_avx512.cpp"]
    assert "-mavx2 -mfma" in kernels["kernels_avx2.cpp"] and "-mavx512f" not in kernels["kernels_avx2.cpp"]
    assert "-mamx-tile -mamx-bf16" in kernels["kernels_amx.cpp"] and "-mamx" not in kernels["kernels_avx512_bf16.cpp"]
    assert all(" -m" not in cmd for name, cmd in kernels.items() if not any(isa in name for isa in native.ISA_FLAGS))


def test_no_kernel_file_emulates_the_flags_with_a_target_pragma():
    for source in (REPO_ROOT / "csrc" / "kernels" / "cpu").glob("*"):
        assert "#pragma GCC target" not in source.read_text(), source


def test_the_kernel_library_is_compiled_once_and_linked_into_the_extension_and_the_simulator():
    edges = edges_by_output()
    kernel_objs = [o for o, e in edges.items() if e.compile and e.inputs[0].startswith("csrc/kernels/cpu/")]
    assert len(kernel_objs) == len(list((REPO_ROOT / "csrc" / "kernels" / "cpu").glob("*.cpp")))
    extension, simulator = edges["kernel_pytorch/_C.so"], edges["kernel_pytorch/lib/libmyasic.so"]
    # Baseline first, then ascending ISA levels: an inline function emitted by several objects
    # is kept from the first, which must run on every CPU the object's callers run on.
    for library in (extension, simulator):
        assert library.inputs[-len(kernel_objs):] == kernel_objs
    levels = [max((i + 1 for i, isa in enumerate(native.ISA_FLAGS) if isa in o), default=0) for o in kernel_objs]
    assert levels == sorted(levels) and (levels[-1] == len(native.ISA_FLAGS) or not X86)


def test_the_extension_takes_the_cuda_sources_only_in_a_cuda_build():
    cpu = {e.inputs[0] for e in edges_by_output().values() if e.compile}
    cuda = {e.inputs[0] for e in edges_by_output(cuda=True, nvcc="nvcc").values() if e.compile}
    assert not any("/cuda/" in s for s in cpu)
    assert any(s.endswith(".cu") for s in cuda) and any(s.startswith("csrc/ops/cuda/") for s in cuda)


@needs_cxx
def test_each_runtime_folder_becomes_a_library_exporting_what_its_map_names(tree):
    root, edges = tree
    links = {e.output: e for e in edges if not e.compile}
    assert set(links) == {"kernel_pytorch/_C.so", "kernel_pytorch/lib/libmyasic.so", "kernel_pytorch/lib/libkpdr_opencl.so"}
    assert "--version-script=csrc/runtime/myasic/exports.map" in links["kernel_pytorch/lib/libmyasic.so"].cmd
    assert not any("kernels/cpu" in i for i in links["kernel_pytorch/lib/libkpdr_opencl.so"].inputs)


@needs_cxx
@needs_ninja
@needs_x86
def test_a_first_build_prints_a_line_per_unit_with_the_elapsed_time(tree):
    root, edges = tree
    out = ninja(root)
    assert "C++ csrc/kernels/cpu/kernels_avx2.cpp" in out and "LINK kernel_pytorch/lib/libmyasic.so" in out
    assert f"[{len(edges)}/{len(edges)} " in out and "s] " in out
    assert ninja(root).strip() == "ninja: no work to do."


@needs_cxx
@needs_ninja
@needs_x86
def test_an_edit_of_one_kernel_family_rebuilds_only_what_includes_it(tree):
    root, _ = tree
    ninja(root)
    touch_later(root / "csrc/kernels/cpu/family_b.h")
    planned = ninja(root, "-n")
    assert "C++ csrc/kernels/cpu/kernels_avx2.cpp" in planned
    assert "isa.cpp" not in planned and "glue.cpp" not in planned and "libkpdr_opencl" not in planned
    assert "LINK kernel_pytorch/_C.so" in planned and "LINK kernel_pytorch/lib/libmyasic.so" in planned


@needs_cxx
@needs_x86
def test_without_ninja_the_same_graph_builds_and_then_skips_what_is_up_to_date(tree, capsys):
    root, edges = tree
    native._run_here(str(root), edges, jobs=2)
    assert all((root / e.output).exists() for e in edges)
    first = capsys.readouterr().out
    assert "LINK kernel_pytorch/_C.so" in first
    native._run_here(str(root), edges, jobs=2)
    assert capsys.readouterr().out == ""
    touch_later(root / "csrc/aten/glue.cpp")
    native._run_here(str(root), edges, jobs=2)
    rebuilt = capsys.readouterr().out
    assert "glue.cpp" in rebuilt and "kernels_avx2" not in rebuilt and "LINK kernel_pytorch/_C.so" in rebuilt


def setup_sh(tmp_path, **env):
    result = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "setup.sh"), "--dry-run"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, env=dict(os.environ, **env))
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_setup_sh_dry_run_changes_nothing(tmp_path):
    stamp = REPO_ROOT / "build" / "requirements.stamp"
    before = stamp.stat().st_mtime if stamp.exists() else None
    out = setup_sh(tmp_path)
    assert "ninja" in out or "build_support.native" in out
    assert (stamp.stat().st_mtime if stamp.exists() else None) == before


def test_kp_system_packages_0_skips_the_system_wide_pocl_install(tmp_path):
    out = setup_sh(tmp_path, KP_SYSTEM_PACKAGES="0")
    assert "KP_SYSTEM_PACKAGES=0: not installing PoCL" in out
    assert "apt-get install" not in out
