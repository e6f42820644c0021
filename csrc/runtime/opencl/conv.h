// The OpenCL runtime's convolution and pooling entries (conv.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

kpdrError_t im2col(const kpdrIm2colArgs* args, kpdrStream_t stream);
kpdrError_t max_pool2d(const kpdrMaxPool2dArgs* args, kpdrStream_t stream);

}  // namespace kpdr_opencl
