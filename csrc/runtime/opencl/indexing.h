// The OpenCL runtime's gather and scatter entries (indexing.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t gather(const kpdrIndexArgs* args, kpdrStream_t stream);
kpdrError_t scatter(const kpdrIndexArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
