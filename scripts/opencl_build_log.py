"""Builds the OpenCL runtime's kernel source on one OpenCL device and prints the compiler's log.

    OCL_ICD_FILENAMES=libnvidia-opencl.so.1 python scripts/opencl_build_log.py \
        --options "-DKP_DTYPE=2 -DKP_WG=256 -DKP_SHFL=1 -cl-nv-verbose" [--binary out.ptx]

The source is the one ``libkpdr_opencl.so`` compiles (the ``R"CLC(...)CLC"`` strings of
csrc/runtime/opencl/*.cpp). NVIDIA's compiler prints each kernel's registers, spills and local
memory with ``-cl-nv-verbose``; its program binary is PTX text (``--binary`` writes it), where
one can check which loads became vector loads. Nothing here is needed at run time.
"""

import argparse
import ctypes
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
CL_PROGRAM_BUILD_LOG = 0x1183
CL_PROGRAM_BINARY_SIZES = 0x1165
CL_PROGRAM_BINARIES = 0x1166
CL_DEVICE_NAME = 0x102B


def kernel_source(files):
    """The OpenCL C text of the runtime's raw-string kernel sources, concatenated."""
    text = ""
    for path in files:
        text += "".join(re.findall(r'R"CLC\((.*?)\)CLC"', Path(path).read_text(), re.S))
    if not text:
        sys.exit("no R\"CLC(...)CLC\" kernel source found in " + ", ".join(map(str, files)))
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default="-DKP_DTYPE=0 -DKP_WG=256", help="clBuildProgram options")
    parser.add_argument("--device", type=int, default=0, help="index among the first platform's devices")
    parser.add_argument("--source", nargs="*", default=[str(REPO_ROOT / "csrc/runtime/opencl/kernel_source.cpp")])
    parser.add_argument("--binary", help="write the program binary (PTX on NVIDIA) here")
    parser.add_argument("--library", default="libOpenCL.so.1")
    args = parser.parse_args(argv)

    cl = ctypes.CDLL(args.library)
    platform, count = ctypes.c_void_p(), ctypes.c_uint()
    if cl.clGetPlatformIDs(1, ctypes.byref(platform), ctypes.byref(count)) != 0 or count.value == 0:
        sys.exit("no OpenCL platform (set OCL_ICD_FILENAMES to the vendor's library)")
    devices = (ctypes.c_void_p * 16)()
    if cl.clGetDeviceIDs(platform, ctypes.c_uint64(CL_DEVICE_TYPE_ALL), 16, devices, ctypes.byref(count)) != 0:
        sys.exit("clGetDeviceIDs failed")
    device = ctypes.c_void_p(devices[args.device])
    name = ctypes.create_string_buffer(256)
    cl.clGetDeviceInfo(device, CL_DEVICE_NAME, 256, name, None)
    status = ctypes.c_int()
    cl.clCreateContext.restype = ctypes.c_void_p
    context = ctypes.c_void_p(cl.clCreateContext(None, 1, ctypes.byref(device), None, None, ctypes.byref(status)))
    source = ctypes.c_char_p(kernel_source(args.source).encode())
    cl.clCreateProgramWithSource.restype = ctypes.c_void_p
    program = ctypes.c_void_p(cl.clCreateProgramWithSource(context, 1, ctypes.byref(source), None,
                                                           ctypes.byref(status)))
    built = cl.clBuildProgram(program, 1, ctypes.byref(device), args.options.encode(), None, None)
    size = ctypes.c_size_t()
    cl.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, None, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value + 1)
    cl.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size.value, log, None)
    print(f"device: {name.value.decode()}\noptions: {args.options}\nclBuildProgram: {built}")
    print(log.value.decode(errors="replace"))
    if built == 0 and args.binary:
        cl.clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, ctypes.sizeof(size), ctypes.byref(size), None)
        binary = ctypes.create_string_buffer(size.value)
        pointer = ctypes.cast(binary, ctypes.c_void_p)
        cl.clGetProgramInfo(program, CL_PROGRAM_BINARIES, ctypes.sizeof(pointer), ctypes.byref(pointer), None)
        Path(args.binary).write_bytes(binary.raw)
    return 0 if built == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
