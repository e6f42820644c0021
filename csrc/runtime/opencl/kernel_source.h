// The OpenCL C source of the kernel table (kernel_source.cpp).
#pragma once

namespace kpdr_opencl {
// Compiled once per (device, dtype) with -DKP_DTYPE=<kpdrDtype> -DKP_WG=<work-group size>.
extern const char* const kKernelSource;
}  // namespace kpdr_opencl
