// The OpenCL runtime's scan entry (scan.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t scan(const kpdrScanArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
