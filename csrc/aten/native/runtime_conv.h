// Convolution, max pooling and batch norm through the runtime's entries
// (kpdr.h's core-op section) when device memory is not host addressable:
// runtime_conv.cpp (im2col + gemm, max_pool2d) and runtime_batch_norm.cpp
// (composed of the pointwise and reduce entries).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "host_kernels.h"

namespace kernel_pytorch::native {

// convolution / convolution_backward, boxed: replaces the arguments on the
// stack by the results and returns true, or returns false having changed
// nothing (the caller falls back): 3-d convolutions, a runtime
// without gemm or im2col, an entry answering NOT_SUPPORTED, bad arguments
// (the fallback raises ATen's errors for them).
bool runtime_convolution(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// native_batch_norm / _native_batch_norm_legit and native_batch_norm_backward, likewise.
bool runtime_batch_norm(const c10::OperatorHandle& op, torch::jit::Stack* stack);
bool runtime_batch_norm_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// max_pool2d_with_indices and its backward through the max_pool2d entry.
void register_runtime_pooling(Registrar& r);
// aten::im2col / aten::col2im (nn.Unfold, nn.Fold) through the im2col entry.
void register_runtime_unfold(Registrar& r);

}  // namespace kernel_pytorch::native
