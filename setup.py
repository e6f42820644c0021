"""Build kernel_pytorch: the my_asic PyTorch extension, its CPU kernel library and runtimes.

The native libraries (``kernel_pytorch/_C*.so``, the csrc/ layers of docs/architecture.md
against the installed torch, with the CUDA
kernels when torch is a CUDA build and nvcc is found; ``kernel_pytorch/lib/libmyasic.so``, the
simulated ASIC behind the kpdr ABI) are one ninja graph, build_support/native.py. The C++
compiler ($CXX) is checked first (build_support/toolchain.py). Install with
``pip install --no-build-isolation -e .`` so the extension is compiled against your torch.
"""

import os
import shutil
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
from build_support import native  # noqa: E402

native.configure_compilers()


class BuildNative(build_ext):
    """Builds every native library in place with the ninja graph, then copies them where
    setuptools wants them (nowhere for an editable or in-place build)."""

    def run(self):
        built = native.build(ROOT)
        package = os.path.dirname(os.path.abspath(self.get_ext_fullpath("kernel_pytorch._C")))
        for path in built:
            target = os.path.join(package, os.path.relpath(path, "kernel_pytorch"))
            if os.path.abspath(target) != os.path.join(ROOT, path):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(os.path.join(ROOT, path), target)


setup(
    name="kernel_pytorch",
    version="0.1.0",
    description="A PyTorch out-of-tree device (my_asic on PrivateUse1) and a hardware abstraction layer",
    long_description=open(os.path.join(ROOT, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["kernel_pytorch", "kernel_pytorch.*"]),
    install_requires=["torch>=2.9", "numpy"],
    extras_require={"nvidia": ["nvidia-ml-py"], "opencl": ["pyopencl"], "test": ["pytest"]},
    ext_modules=[Extension("kernel_pytorch._C", sources=[])],  # sources: build_support/native.py
    cmdclass={"build_ext": BuildNative},
    entry_points={
        # torch imports this on `import torch` (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off).
        "torch.backends": ["my_asic = kernel_pytorch:_autoload"],
        "console_scripts": ["kernel-pytorch = kernel_pytorch.cli:main"],
    },
    zip_safe=False,
)
