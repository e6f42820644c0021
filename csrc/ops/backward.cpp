// The backward ops (rms_norm_backward, silu_and_mul_backward) on every device
// without a kernel of its own: the formulas in ATen ops (csrc/ops/reference).
// CUDA registers kernels for them (csrc/ops/cuda/ops.cpp), which win over
// these for CUDA tensors.
#include <torch/library.h>

#include "ops/reference.h"

namespace kernel_pytorch::ops {
namespace {

void check_rms_norm_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(grad.sizes() == x.sizes(), "kernel_pytorch.ops.rms_norm_backward: grad must have x's shape ",
              x.sizes(), ", got ", grad.sizes());
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1),
              "kernel_pytorch.ops.rms_norm_backward: weight must have shape [x.size(-1)], got ",
              weight.sizes(), " for x ", x.sizes());
}

void check_silu_and_mul_backward(const at::Tensor& grad, const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0 && grad.dim() == x.dim() && grad.size(-1) * 2 == x.size(-1) &&
                  grad.numel() * 2 == x.numel(),
              "kernel_pytorch.ops.silu_and_mul_backward: grad must be x's shape with the last dimension "
              "halved; got grad ", grad.sizes(), " and x ", x.sizes());
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                     const at::Tensor& weight, double eps) {
  check_rms_norm_backward(grad, x, weight);
  return reference::rms_norm_backward(grad, x, weight, eps);
}

at::Tensor silu_and_mul_backward(const at::Tensor& grad, const at::Tensor& x) {
  check_silu_and_mul_backward(grad, x);
  return reference::silu_and_mul_backward(grad, x);
}

}  // namespace

TORCH_LIBRARY_IMPL(kernel_pytorch, CompositeExplicitAutograd, m) {
  m.impl("rms_norm_backward", &rms_norm_backward);
  m.impl("silu_and_mul_backward", &silu_and_mul_backward);
}

}  // namespace kernel_pytorch::ops
