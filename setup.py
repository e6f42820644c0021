"""Build kernel_pytorch: the my_asic PyTorch extension and its reference runtime.

Two native artifacts are produced:

* ``kernel_pytorch/_C*.so`` -- the PrivateUse1 glue (csrc/aten), built with
  torch.utils.cpp_extension against the installed torch;
* ``kernel_pytorch/lib/libmyasic.so`` -- the simulated ASIC (csrc/runtime/myasic),
  a plain C++ library with no torch dependency that implements the kpdr ABI.
  The glue loads it with dlopen, exactly as it would load a vendor's runtime.

Install with ``pip install --no-build-isolation -e .`` so the extension is
compiled against the torch you already have.
"""

import glob
import os
import subprocess
import sys

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
RUNTIME_SOURCES = sorted(glob.glob(os.path.join("csrc", "runtime", "myasic", "*.cpp")))


class BuildWithRuntime(BuildExtension):
    """Builds the reference device runtime next to the extension module."""

    def run(self):
        super().run()
        self._build_runtime()

    def _build_runtime(self):
        ext_path = self.get_ext_fullpath("kernel_pytorch._C")
        out_dir = os.path.join(os.path.dirname(os.path.abspath(ext_path)), "lib")
        os.makedirs(out_dir, exist_ok=True)
        target = os.path.join(out_dir, "libmyasic.so")
        cxx = os.environ.get("CXX", "c++")
        cmd = [
            cxx, "-O2", "-std=c++17", "-fPIC", "-shared", "-pthread",
            "-fvisibility=hidden", "-fvisibility-inlines-hidden",
            # Export exactly the kpdr ABI, whatever else the toolchain makes visible.
            "-Wl,--version-script=" + os.path.join(ROOT, "csrc", "runtime", "myasic", "exports.map"),
            "-I", os.path.join(ROOT, "csrc", "runtime"),
            *[os.path.join(ROOT, s) for s in RUNTIME_SOURCES],
            "-o", target,
        ]
        print("building the reference device runtime:", " ".join(cmd), file=sys.stderr)
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
    ext_modules=[
        CppExtension(
            name="kernel_pytorch._C",
            sources=sorted(glob.glob(os.path.join("csrc", "aten", "*.cpp")))
            + sorted(glob.glob(os.path.join("csrc", "distributed", "*.cpp"))),
            include_dirs=[os.path.join(ROOT, "csrc")],
            # The C++ standard is the one torch.utils.cpp_extension picks for this torch.
            extra_compile_args={"cxx": ["-O2", "-fvisibility=hidden"]},
            libraries=["dl"],
        )
    ],
    cmdclass={"build_ext": BuildWithRuntime.with_options(use_ninja=True)},
    entry_points={
        # torch imports this on `import torch` (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off).
        "torch.backends": ["my_asic = kernel_pytorch:_autoload"],
        "console_scripts": ["kernel-pytorch = kernel_pytorch.cli:main"],
    },
    zip_safe=False,
)
