// The OpenCL runtime's softmax_dim, nll_loss and layer_norm entries and the
// reduce entry's ARGMAX/ARGMIN/VAR/STD (losses.cpp).
#pragma once

#include "kpdr.h"

namespace kpdr_opencl {

class Runtime;
class Stream;

kpdrError_t softmax_dim(const kpdrSoftmaxDimArgs* args, kpdrStream_t stream);
kpdrError_t nll_loss(const kpdrNllLossArgs* args, kpdrStream_t stream);
kpdrError_t layer_norm(const kpdrLayerNormArgs* args, kpdrStream_t stream);
// Called by reduce() (pointwise.cpp) for those op codes, after it validated the stream and shape.
kpdrError_t reduce_statistics(const kpdrReduceArgs* args, Stream& stream, Runtime* runtime);

}  // namespace kpdr_opencl
