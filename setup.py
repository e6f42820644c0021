"""Build kernel_pytorch: the my_asic PyTorch extension and its device runtimes.

Three native artifacts are produced:

* ``kernel_pytorch/_C*.so`` -- the PrivateUse1 device (csrc/ layers, docs/architecture.md), built with
  torch.utils.cpp_extension against the installed torch;
* ``kernel_pytorch/lib/libmyasic.so`` -- the simulated ASIC (csrc/runtime/myasic),
  a plain C++ library with no torch dependency that implements the kpdr ABI.
  The glue loads it with dlopen, exactly as it would load a vendor's runtime;
* ``kernel_pytorch/lib/libkpdr_opencl.so`` -- the kpdr runtime over OpenCL
  (csrc/runtime/opencl), which loads libOpenCL.so.1 itself at run time.

When torch is a CUDA build and nvcc is found (CUDA_HOME), the extension also
gets the CUDA kernels of kernel_pytorch.ops (csrc/kernels/cuda/*.cu,
csrc/ops/cuda/*.cpp) for the architectures of TORCH_CUDA_ARCH_LIST (default:
the visible GPUs, else Ampere to Hopper); KP_BUILD_CUDA=0 leaves them out.
The C++ compiler ($CXX) is checked first: one that would link a private copy
of libstdc++ into the libraries is replaced or refused (build_support/toolchain.py).

Install with ``pip install --no-build-isolation -e .`` so the extension is
compiled against the torch you already have.
"""

import glob
import os
import subprocess
import sys

# Building must not import an installed kernel_pytorch: torch's device-backend
# autoload would, and a stale or moved install then breaks `import torch` here.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

import torch  # noqa: E402
from setuptools import find_packages, setup
from torch.utils import cpp_extension
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
from build_support import toolchain  # noqa: E402


def _configure_cxx():
    """Checks $CXX (or picks a working compiler) before anything is compiled."""
    try:
        cxx, note = toolchain.choose_cxx(os.environ)
    except toolchain.ToolchainError as e:
        sys.exit(str(e))
    if note:
        os.environ["CXX"] = cxx  # the extension's link and the runtime's build both use it
        cc = toolchain.matching_c_compiler(cxx)
        if cc is not None and os.environ.get("CC") != cc:
            # nvcc's host compiler (torch passes $CC as -ccbin) joins the same toolchain.
            note += f"; and CC={cc} (was {os.environ.get('CC', 'unset')})"
            os.environ["CC"] = cc
        print(note, file=sys.stderr)


_configure_cxx()
BUILD_CUDA, CUDA_REASON, CUDA_NOTE = toolchain.cuda_build_decision(
    torch.version.cuda, cpp_extension.CUDA_HOME, os.environ
)
if not BUILD_CUDA or "build_ext" in sys.argv or "install" in sys.argv or "bdist_wheel" in sys.argv:
    print(CUDA_NOTE, file=sys.stderr)
if BUILD_CUDA and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
    visible = [torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())] \
        if torch.cuda.is_available() else []
    os.environ["TORCH_CUDA_ARCH_LIST"] = toolchain.default_cuda_arch_list(visible)
# The torch-free CPU kernel library: compiled into the extension (CPU kernels)
# and into the simulator (its "device" kernels).
KERNEL_SOURCES = sorted(glob.glob(os.path.join("csrc", "kernels", "cpu", "*.cpp")))
RUNTIME_SOURCES = sorted(glob.glob(os.path.join("csrc", "runtime", "myasic", "*.cpp"))) + KERNEL_SOURCES
# The OpenCL runtime: torch-free, includes only kpdr.h, needs no OpenCL SDK
# (it dlopens libOpenCL.so.1 at kpdrInit).
OPENCL_RUNTIME_SOURCES = sorted(glob.glob(os.path.join("csrc", "runtime", "opencl", "*.cpp")))
# (library, sources, folder with exports.map, extra link arguments)
RUNTIMES = [
    ("libmyasic.so", RUNTIME_SOURCES, os.path.join("csrc", "runtime", "myasic"), []),
    ("libkpdr_opencl.so", OPENCL_RUNTIME_SOURCES, os.path.join("csrc", "runtime", "opencl"), ["-ldl"]),
]
EXTENSION_SOURCES = (
    sorted(glob.glob(os.path.join("csrc", "core", "*.cpp")))
    + sorted(glob.glob(os.path.join("csrc", "aten", "*.cpp")))
    + sorted(glob.glob(os.path.join("csrc", "aten", "native", "*.cpp")))
    + sorted(glob.glob(os.path.join("csrc", "profiler", "*.cpp")))
    + sorted(glob.glob(os.path.join("csrc", "ops", "*.cpp")))
    + sorted(glob.glob(os.path.join("csrc", "distributed", "*.cpp")))
    + sorted(glob.glob(os.path.join("csrc", "python", "*.cpp")))
    + KERNEL_SOURCES
)
CUDA_SOURCES = sorted(glob.glob(os.path.join("csrc", "ops", "cuda", "*.cpp"))) + sorted(
    glob.glob(os.path.join("csrc", "kernels", "cuda", "*.cu"))
)


# Kineto's headers, which torch ships when it was built with Kineto: the
# PrivateUse1 profiler registry includes them by bare name, and
# csrc/profiler/profiler_kineto.cpp (torch.profiler's my_asic device activities)
# compiles only where they are found.
KINETO_INCLUDE = [d for d in [os.path.join(os.path.dirname(torch.__file__), "include", "kineto")] if os.path.isdir(d)]


def _extension():
    common = dict(
        name="kernel_pytorch._C",
        include_dirs=[os.path.join(ROOT, "csrc")] + KINETO_INCLUDE,
        libraries=["dl"],
    )
    if BUILD_CUDA:
        return CUDAExtension(
            sources=EXTENSION_SOURCES + CUDA_SOURCES,
            define_macros=[("KP_WITH_CUDA", "1")],
            # The C++ standard is the one torch.utils.cpp_extension picks for this torch.
            extra_compile_args={"cxx": ["-O2", "-fvisibility=hidden"], "nvcc": ["-O3", "-lineinfo"]},
            **common,
        )
    return CppExtension(
        sources=EXTENSION_SOURCES,
        define_macros=[("KP_CUDA_NOT_BUILT", str(CUDA_REASON))],
        extra_compile_args={"cxx": ["-O2", "-fvisibility=hidden"]},
        **common,
    )



class BuildWithRuntime(BuildExtension):
    """Builds the device runtimes (simulator, OpenCL) next to the extension module."""

    def run(self):
        super().run()
        self._build_runtime()

    def _build_runtime(self):
        ext_path = self.get_ext_fullpath("kernel_pytorch._C")
        out_dir = os.path.join(os.path.dirname(os.path.abspath(ext_path)), "lib")
        os.makedirs(out_dir, exist_ok=True)
        for name, sources, directory, libraries in RUNTIMES:
            self._build_one_runtime(os.path.join(out_dir, name), sources, directory, libraries)

    def _build_one_runtime(self, target, sources, directory, libraries):
        # Incremental like the ninja-built extension: relink only when an input is newer.
        exports = os.path.join(ROOT, directory, "exports.map")
        inputs = (
            [os.path.join(ROOT, p) for p in sources]
            + glob.glob(os.path.join(ROOT, "csrc", "runtime", "**", "*.h"), recursive=True)
            + glob.glob(os.path.join(ROOT, "csrc", "kernels", "**", "*.h"), recursive=True)
            + [exports, os.path.abspath(__file__)]
        )
        if os.path.exists(target) and os.path.getmtime(target) >= max(map(os.path.getmtime, inputs)):
            print(f"device runtime up to date: {target}", file=sys.stderr)
            return
        cxx = os.environ.get("CXX", "c++")
        cmd = [
            cxx, "-O2", "-std=c++17", "-fPIC", "-shared", "-pthread",
            "-fvisibility=hidden", "-fvisibility-inlines-hidden",
            # Export exactly the kpdr ABI, whatever else the toolchain makes visible.
            "-Wl,--version-script=" + exports,
            "-I", os.path.join(ROOT, "csrc", "runtime"),
            "-I", os.path.join(ROOT, "csrc"),
            *[os.path.join(ROOT, s) for s in sources],
            *libraries,
            "-o", target,
        ]
        print("building a device runtime:", " ".join(cmd), file=sys.stderr)
        subprocess.check_call(cmd)


setup(
    name="kernel_pytorch",
    version="0.1.0",
    description="A PyTorch out-of-tree device (my_asic on PrivateUse1) and a hardware abstraction layer",
    long_description=open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    if os.path.exists(os.path.join(ROOT, "README.md"))
    else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["kernel_pytorch", "kernel_pytorch.*"]),
    install_requires=["torch>=2.9", "numpy"],
    extras_require={
        "nvidia": ["nvidia-ml-py"],
        "opencl": ["pyopencl"],
        "test": ["pytest"],
    },
    ext_modules=[_extension()],
    cmdclass={"build_ext": BuildWithRuntime.with_options(use_ninja=True)},
    entry_points={
        # torch imports this on `import torch` (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off).
        "torch.backends": ["my_asic = kernel_pytorch:_autoload"],
        "console_scripts": ["kernel-pytorch = kernel_pytorch.cli:main"],
    },
    zip_safe=False,
)
