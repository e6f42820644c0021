// The OpenCL C source of the GEMM entry (gemm_source.cpp).
#pragma once

namespace kpdr_opencl {
// Built per (device, dtype, tile configuration) with #defines prepended by gemm.cpp.
extern const char* const kGemmSource;
}  // namespace kpdr_opencl
