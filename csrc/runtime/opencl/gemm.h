// The OpenCL runtime's GEMM entry (kpdr.h's kpdrGemmArgs, gemm.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t gemm(const kpdrGemmArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
