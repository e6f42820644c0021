"""The native build: one ninja graph for every library kernel_pytorch ships.

    python -m build_support.native              configure, write build/native/build.ninja, build
    python -m build_support.native --configure  only rewrite the graph (ninja runs this itself when
                                                setup.py, build_support/ or the csrc/ tree changed)

Targets, all written in place (setup.py copies them into a wheel):

* the CPU kernel library (csrc/kernels/cpu, torch-free), compiled once and linked into both
  libraries below; each kernel family's unit (csrc/kernels/cpu/per_isa/<family>.cpp) is
  compiled once per ISA level (CPU_LEVELS) with that level's flags, and isa.cpp picks a level
  at run time;
* ``kernel_pytorch/_C`` -- every other csrc/ C++ file, against the installed torch, plus the
  CUDA sources (``cuda/`` folders, ``*.cu``) when torch is a CUDA build and nvcc is found;
* one kpdr runtime per folder of csrc/runtime/ (RUNTIMES), plain C++ that exports what the
  folder's exports.map names.

ninja tracks headers (depfiles) and command lines, so an edit rebuilds what depends on it and
no more. Without a ninja binary the same graph runs here, judged by modification times.
"""

import glob
import itertools
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, List

from build_support import toolchain

BUILD_DIR = os.path.join("build", "native")
GRAPH = os.path.join(BUILD_DIR, "build.ninja")
NINJA_STATUS = "[%f/%t %es] "  # units done / total, seconds since the start: one line per unit
# CPU kernel ISA level -> its flags besides -DKP_CPU_CAPABILITY=<level> (the namespace): the Vec
# that vec.h picks and the compiler's -m flags. Baseline first, then ascending; beyond the
# baseline x86-64 only.
PER_ISA = "csrc/kernels/cpu/per_isa/"
CPU_LEVELS = {
    "generic": "",
    "avx2": "-DKP_VEC_AVX2=1 -mavx2 -mfma -mf16c",
    "avx512": "-DKP_VEC_AVX512=1 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c",
    "avx512_bf16": ("-DKP_VEC_AVX512=1 -DKP_VEC_AVX512_BF16=1 "
                    "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx2 -mfma -mf16c"),
    "amx": ("-DKP_VEC_AVX512=1 -DKP_VEC_AVX512_BF16=1 -DKP_CPU_AMX=1 "
            "-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mamx-tile -mamx-bf16 -mavx2 -mfma -mf16c"),
}
# csrc/runtime/<folder>: (library, links the CPU kernel library, link flags).
RUNTIMES = {
    "myasic": ("libmyasic.so", True, "-pthread"),
    "opencl": ("libkpdr_opencl.so", False, "-ldl -pthread"),
}
TORCH_FREE_FLAGS = "-O2 -std=c++17 -fPIC -pthread -fvisibility=hidden -fvisibility-inlines-hidden -DNDEBUG"


@dataclass
class Edge:
    output: str
    inputs: List[str]
    cmd: str
    desc: str
    implicit: List[str] = field(default_factory=list)
    compile: bool = True  # compiles write a depfile (output + ".d") naming the headers read


def configure_compilers() -> str:
    """Checks $CXX (or picks a working compiler, moving $CC with it); returns the C++ compiler."""
    try:
        cxx, note = toolchain.choose_cxx(os.environ)
    except toolchain.ToolchainError as e:
        sys.exit(str(e))
    if note:
        os.environ["CXX"] = cxx
        cc = toolchain.matching_c_compiler(cxx)
        if cc is not None and os.environ.get("CC") != cc:
            # nvcc's host compiler (-ccbin $CC) joins the same toolchain.
            note += f"; and CC={cc} (was {os.environ.get('CC', 'unset')})"
            os.environ["CC"] = cc
        print(note, file=sys.stderr)
    return cxx


def configure() -> Dict:
    """The compilers and flags of every target, from the toolchain check and the installed torch."""
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # importing torch must not import an installed kernel_pytorch
    import torch
    from torch.utils import cpp_extension

    cxx = configure_compilers()
    cuda, reason, note = toolchain.cuda_build_decision(torch.version.cuda, cpp_extension.CUDA_HOME, os.environ)
    print(note, file=sys.stderr)
    if cuda and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        visible = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]
        os.environ["TORCH_CUDA_ARCH_LIST"] = toolchain.default_cuda_arch_list(visible)
    # Include and library paths as torch's own extension builder would use them.
    ext = (cpp_extension.CUDAExtension if cuda else cpp_extension.CppExtension)("kernel_pytorch._C", [])
    kineto = os.path.join(os.path.dirname(torch.__file__), "include", "kineto")  # for profiler_kineto.cpp
    # -isystem: no warnings from torch's headers; -MD (not -MMD) still tracks them.
    includes = [kineto] * os.path.isdir(kineto) + ext.include_dirs + [sysconfig.get_path("include")]
    with open(cpp_extension.__file__) as source:  # the standard BuildExtension passes (not an API)
        std = "c++20" if "c++20" in source.read() else "c++17"
    common = " ".join([f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
                       "-DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C -DNDEBUG",
                       "-DKP_WITH_CUDA=1" if cuda else f"-DKP_CUDA_NOT_BUILT={reason}",
                       "-Icsrc", *(f"-isystem {shlex.quote(d)}" for d in includes)])
    launcher = "ccache " if shutil.which("ccache") and "ccache" not in cxx else ""
    cflags = os.environ.get("CXXFLAGS", "")
    cfg = dict(
        cxx=launcher + cxx,
        torch_free=f"{TORCH_FREE_FLAGS} -Icsrc -Icsrc/runtime {cflags}",
        ext=f"-O2 -std={std} -fPIC -fvisibility=hidden {common} {cflags}",
        ext_link=" ".join([f"-L{shlex.quote(d)}" for d in ext.library_dirs] + [f"-l{lib}" for lib in ext.libraries] + ["-ldl"]),
        ext_name="kernel_pytorch/_C" + sysconfig.get_config_var("EXT_SUFFIX"),
        isa=platform.machine().lower() in ("x86_64", "amd64"),
        cuda=cuda,
        python=sys.executable,
        graph_inputs=[torch.version.__file__],
    )
    if cuda:
        nvcc = os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")
        ccbin = f"-ccbin {shlex.quote(os.environ['CC'])} " if os.environ.get("CC") else ""
        arch = " ".join(cpp_extension._get_cuda_arch_flags())  # from TORCH_CUDA_ARCH_LIST
        cfg["nvcc"] = (f"{shlex.quote(nvcc)} {ccbin}{common} {' '.join(cpp_extension.COMMON_NVCC_FLAGS)} {arch} "
                       f"-Xcompiler -fPIC -O3 -lineinfo -std={std}")
    return cfg


def _sources(root, pattern):
    return sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern), recursive=True))


def graph(root: str, cfg: Dict) -> List[Edge]:
    """Every compile and link of the build, in dependency order (paths relative to ``root``)."""
    edges = []

    def compile(src, flags, nvcc=False, level=None):
        obj = os.path.join(BUILD_DIR, "obj", src + (f".{level}" if level else "") + ".o")
        if nvcc:
            cmd = f"{cfg['nvcc']} --generate-dependencies-with-compile --dependency-output {obj}.d -c {src} -o {obj}"
        else:
            cmd = f"{cfg['cxx']} -MD -MF {obj}.d {flags} -c {src} -o {obj}"
        edges.append(Edge(obj, [src], cmd, ("CUDA " if nvcc else "C++ ") + src + (f" [{level}]" if level else "")))
        return obj

    def link(out, objs, flags, implicit=()):
        cmd = f"{cfg['cxx']} -shared {' '.join(objs)} {flags} -o {out}"
        edges.append(Edge(out, list(objs), cmd, "LINK " + out, list(implicit), compile=False))

    # Baseline objects first, then the ISA levels in ascending order: an inline function that
    # several of them emit is kept from the first, so baseline code never runs AVX-512 code.
    levels = list(CPU_LEVELS) if cfg["isa"] else ["generic"]
    kernels = [compile(s, cfg["torch_free"]) for s in _sources(root, "csrc/kernels/cpu/*.cpp")]
    kernels += [compile(s, f"{cfg['torch_free']} -DKP_CPU_CAPABILITY={level} {CPU_LEVELS[level]}", level=level)
                for level in levels for s in _sources(root, PER_ISA + "*.cpp")]
    cuda_part = re.compile(r"(^|/)cuda/|\.cu$")
    ext_sources = [s for s in _sources(root, "csrc/**/*.cpp") + _sources(root, "csrc/**/*.cu")
                   if not s.startswith(("csrc/kernels/cpu/", "csrc/runtime/")) and (cfg["cuda"] or not cuda_part.search(s))]
    ext_objs = [compile(s, cfg["ext"], nvcc=s.endswith(".cu")) for s in ext_sources]
    link(cfg["ext_name"], ext_objs + kernels, cfg["ext_link"])
    for folder, (library, uses_kernels, libs) in RUNTIMES.items():
        sources = _sources(root, f"csrc/runtime/{folder}/*.cpp")
        if sources:
            exports = f"csrc/runtime/{folder}/exports.map"
            script = f"-Wl,--version-script={exports}" if os.path.exists(os.path.join(root, exports)) else ""
            objs = [compile(s, cfg["torch_free"]) for s in sources] + (kernels if uses_kernels else [])
            link(f"kernel_pytorch/lib/{library}", objs, f"-fvisibility=hidden {script} {libs}", [exports] * bool(script))
    return edges


def write_ninja(root: str, edges: List[Edge], cfg: Dict) -> None:
    def esc(path):
        return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")

    folders = [os.path.relpath(d, root) for d, _, _ in os.walk(os.path.join(root, "csrc"))]
    regen_inputs = ["setup.py", "build_support/native.py", "build_support/toolchain.py", *folders, *cfg["graph_inputs"]]
    lines = [f"# Generated by build_support/native.py: edit that, not this.\nninja_required_version = 1.3\nbuilddir = {BUILD_DIR}",
             "rule compile\n  command = $cmd\n  description = $desc\n  depfile = $out.d\n  deps = gcc",
             "rule link\n  command = $cmd\n  description = $desc",
             f"rule configure\n  command = {shlex.quote(cfg['python'])} -m build_support.native --configure\n"
             "  description = CONFIGURE build/native/build.ninja\n  generator = 1",
             f"build {esc(GRAPH)}: configure | {' '.join(map(esc, regen_inputs))}"]
    for e in edges:
        implicit = f" | {' '.join(map(esc, e.implicit))}" if e.implicit else ""
        lines.append(f"build {esc(e.output)}: {'compile' if e.compile else 'link'} {' '.join(map(esc, e.inputs))}{implicit}\n"
                     f"  cmd = {e.cmd.replace('$', '$$')}\n  desc = {e.desc}")
    os.makedirs(os.path.join(root, BUILD_DIR), exist_ok=True)
    with open(os.path.join(root, GRAPH), "w") as out:  # always rewritten: ninja sees it is new
        out.write("\n".join(lines) + "\n")


def _run_here(root: str, edges: List[Edge], jobs: int) -> None:
    """The graph without ninja: each edge whose output is older than an input or header runs."""
    def stale(e):
        path = os.path.join(root, e.output)
        if not os.path.exists(path):
            return True
        inputs = e.inputs + e.implicit
        if e.compile and os.path.exists(path + ".d"):
            with open(path + ".d") as depfile:
                inputs = depfile.read().split(":", 1)[-1].replace("\\\n", " ").split()
        return any(os.path.getmtime(os.path.join(root, i)) > os.path.getmtime(path)
                   for i in inputs if os.path.exists(os.path.join(root, i)))

    start, done = time.monotonic(), itertools.count(1)
    for phase in ([e for e in edges if e.compile], [e for e in edges if not e.compile]):
        todo = [e for e in phase if stale(e)]

        def run(e):
            os.makedirs(os.path.dirname(os.path.join(root, e.output)), exist_ok=True)
            subprocess.run(e.cmd, shell=True, cwd=root, check=True)
            print(f"[{next(done)}/{len(edges)} {time.monotonic() - start:.1f}s] {e.desc}", flush=True)

        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(run, todo))


def build(root: str) -> List[str]:
    """Configures, writes the graph and brings every library up to date; returns their paths."""
    cfg = configure()
    edges = graph(root, cfg)
    write_ninja(root, edges, cfg)
    jobs = os.environ.get("MAX_JOBS")
    ninja = shutil.which("ninja")
    try:
        if ninja:
            env = dict(os.environ, NINJA_STATUS=os.environ.get("NINJA_STATUS", NINJA_STATUS))
            subprocess.run([ninja, "-f", GRAPH] + ["-j", jobs] * bool(jobs), cwd=root, env=env, check=True)
        else:
            print("kernel_pytorch: no ninja on PATH (pip install ninja): building without it", file=sys.stderr)
            _run_here(root, edges, int(jobs or os.cpu_count() or 1))
    except subprocess.CalledProcessError:
        sys.exit("kernel_pytorch: the native build failed (the compiler's message is above)")
    return [e.output for e in edges if not e.compile]


if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--configure"]:
        config = configure()
        write_ninja(here, graph(here, config), config)
    else:
        build(here)
