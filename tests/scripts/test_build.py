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
    "csrc/kernels/cpu/isa.cpp": "int isa() { return 0; }\n",
    # Each family at each level, in its own namespace; fails to compile unless the build passes
    # a level's -m flags with its Vec.
    "csrc/kernels/cpu/common.h": ('#if defined(KP_VEC_AVX2) && !defined(__AVX2__)\n#error "KP_VEC_AVX2 without -mavx2"\n#endif\n'
                                  "namespace KP_CPU_CAPABILITY { inline int level() { return 1; } }\n"),
    "csrc/kernels/cpu/family_a.h": '#include "kernels/cpu/common.h"\nnamespace KP_CPU_CAPABILITY { int a() { return level(); } }\n',
    "csrc/kernels/cpu/family_b.h": '#include "kernels/cpu/common.h"\nnamespace KP_CPU_CAPABILITY { int b() { return level(); } }\n',
    "csrc/kernels/cpu/per_isa/family_a.cpp": '#include "kernels/cpu/family_a.h"\n',
    "csrc/kernels/cpu/per_isa/family_b.cpp": '#include "kernels/cpu/family_b.h"\n',
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


def kernel_units(edges):
    """(source, level or None) -> compile command of every CPU kernel object."""
    units = {}
    for e in edges.values():
        if e.compile and e.inputs[0].startswith("csrc/kernels/cpu/"):
            level = e.output[:-len(".o")].rsplit(".", 1)[-1] if e.inputs[0].startswith(native.PER_ISA) else None
            units[e.inputs[0], level] = e.cmd
    return units


@needs_x86
def test_each_kernel_family_is_compiled_once_per_isa_level_with_its_flags():
    units = kernel_units(edges_by_output())
    families = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / native.PER_ISA).glob("*.cpp"))
    assert families and sorted({s for s, level in units if level}) == families
    for family in families:
        cmds = {level: units[family, level] for level in native.CPU_LEVELS}
        assert all(f"-DKP_CPU_CAPABILITY={level} " in cmd for level, cmd in cmds.items())
        assert " -m" not in cmds["generic"] and "-DKP_VEC" not in cmds["generic"]
        assert "-mavx2 -mfma" in cmds["avx2"] and "-DKP_VEC_AVX2=1" in cmds["avx2"] and "-mavx512f" not in cmds["avx2"]
        assert "-mavx512f" in cmds["avx512"] and "-mavx512bf16" not in cmds["avx512"] and "-DKP_VEC_AVX512=1" in cmds["avx512"]
        assert "-mavx512bf16" in cmds["avx512_bf16"] and "-DKP_VEC_AVX512_BF16=1" in cmds["avx512_bf16"]
        assert "-mamx" not in cmds["avx512_bf16"] and "KP_CPU_AMX" not in cmds["avx512_bf16"]
        assert "-mamx-tile -mamx-bf16" in cmds["amx"] and "-DKP_CPU_AMX=1" in cmds["amx"]
    assert all(" -m" not in cmd and "KP_CPU_CAPABILITY" not in cmd for (s, level), cmd in units.items() if level is None)


def test_without_x86_only_the_baseline_level_is_compiled():
    assert {level for _, level in kernel_units(edges_by_output(isa=False))} == {None, "generic"}


def test_no_kernel_file_emulates_the_flags_with_a_target_pragma():
    for source in (REPO_ROOT / "csrc" / "kernels" / "cpu").rglob("*.*"):
        assert "#pragma GCC target" not in source.read_text(), source


def test_the_kernel_library_is_compiled_once_and_linked_into_the_extension_and_the_simulator():
    edges = edges_by_output()
    kernel_objs = [o for o, e in edges.items() if e.compile and e.inputs[0].startswith("csrc/kernels/cpu/")]
    cpu = REPO_ROOT / "csrc" / "kernels" / "cpu"
    levels = len(native.CPU_LEVELS) if X86 else 1
    assert len(kernel_objs) == len(list(cpu.glob("*.cpp"))) + levels * len(list((cpu / "per_isa").glob("*.cpp")))
    extension, simulator = edges["kernel_pytorch/_C.so"], edges["kernel_pytorch/lib/libmyasic.so"]
    # Baseline first, then ascending ISA levels: an inline function emitted by several objects
    # is kept from the first, which must run on every CPU the object's callers run on.
    for library in (extension, simulator):
        assert library.inputs[-len(kernel_objs):] == kernel_objs
    order = [0, *(list(native.CPU_LEVELS).index(o.rsplit(".", 2)[-2]) for o in kernel_objs if native.PER_ISA in o)]
    assert order == sorted(order) and (order[-1] == len(native.CPU_LEVELS) - 1 or not X86)


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
    assert "C++ csrc/kernels/cpu/per_isa/family_b.cpp [avx2]" in out and "LINK kernel_pytorch/lib/libmyasic.so" in out
    assert f"[{len(edges)}/{len(edges)} " in out and "s] " in out
    assert ninja(root).strip() == "ninja: no work to do."


@needs_cxx
@needs_ninja
@needs_x86
def test_an_edit_of_one_kernel_family_rebuilds_only_that_family_at_each_level(tree):
    root, _ = tree
    ninja(root)
    touch_later(root / "csrc/kernels/cpu/family_b.h")
    planned = ninja(root, "-n")
    assert all(f"C++ csrc/kernels/cpu/per_isa/family_b.cpp [{level}]" in planned for level in native.CPU_LEVELS)
    assert "family_a" not in planned and "isa.cpp" not in planned and "glue.cpp" not in planned
    assert "LINK kernel_pytorch/_C.so" in planned and "LINK kernel_pytorch/lib/libmyasic.so" in planned
    assert "libkpdr_opencl" not in planned


BUILT_DEPS = REPO_ROOT / native.BUILD_DIR / ".ninja_deps"


@needs_ninja
@pytest.mark.skipif(not BUILT_DEPS.exists(), reason="needs the tree built with ninja (make setup)")
def test_in_the_built_tree_each_family_header_is_read_only_by_its_own_objects():
    """The compiler's own record (ninja -t deps) of the last build: what an edit really rebuilds."""
    out = subprocess.run(["ninja", "-f", native.GRAPH, "-t", "deps"], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    families = {f"csrc/kernels/cpu/{p.stem}.h": p.stem for p in (REPO_ROOT / native.PER_ISA).glob("*.cpp")}
    readers = {header: set() for header in families}
    for block in out.split("\n\n"):
        obj, _, deps = block.strip().partition(":")
        for header in set(deps.split()) & set(families):
            readers[header].add(obj)
    for header, family in families.items():
        own = {f"{native.BUILD_DIR}/obj/{native.PER_ISA}{family}.cpp.{level}.o" for level in native.CPU_LEVELS}
        assert readers[header] and readers[header] <= own, (header, readers[header] - own)


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
    assert "glue.cpp" in rebuilt and "family_b" not in rebuilt and "LINK kernel_pytorch/_C.so" in rebuilt


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
