// The OpenCL runtime's random entry (random.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t random_fill(const kpdrRandomArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
