// The simulator's gather and scatter entries (kpdrIndexArgs), for
// kpdrGetKernels (device_kernels.cpp).
#pragma once

#include "kpdr.h"

namespace myasic {

kpdrError_t gather(const kpdrIndexArgs* args, kpdrStream_t stream);
kpdrError_t scatter(const kpdrIndexArgs* args, kpdrStream_t stream);

}  // namespace myasic
