// The OpenCL runtime's sort entry (sort.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t sort(const kpdrSortArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
