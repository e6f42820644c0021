// The OpenCL runtime's generic pointwise and reduce entries (pointwise.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t pointwise(const kpdrPointwiseArgs* args, kpdrStream_t stream);
kpdrError_t reduce(const kpdrReduceArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
