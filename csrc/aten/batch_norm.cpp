// Batch norm in inference mode returns what PyTorch's meta function predicts
// for a non-CPU device, so fake tensors (torch.compile's tracing) tell the
// truth about it.
//
// ATen's CPU kernel, which my_asic runs (on the device memory itself where it
// is host addressable, through the CPU fallback otherwise), returns empty
// save_mean / save_invstd when training is false; the meta function
// (torch/_decomp/decompositions.py, native_batch_norm_helper) gives every
// device but the CPU the running mean and the inverse standard deviation,
// [C] in the computation dtype, as CUDA does. The backward in inference mode
// reads the running statistics, not these.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "aten/aten.h"
#include "core/core.h"
#include "native/runtime_conv.h"

namespace kernel_pytorch {
namespace {

// native_batch_norm and _native_batch_norm_legit: (input, weight, bias,
// running_mean, running_var, training, momentum, eps) -> (out, save_mean, save_invstd).
void batch_norm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const auto base = stack->size() - n;
  const at::Tensor input = (*stack)[base].toTensor();
  const auto running_mean = (*stack)[base + 3].toOptional<at::Tensor>();
  const auto running_var = (*stack)[base + 4].toOptional<at::Tensor>();
  const bool training = (*stack)[base + 5].toBool();
  const double eps = (*stack)[base + 7].toDouble();
  // Off host memory: composed of the runtime's entries where it has them
  // (native/runtime_batch_norm.cpp), returning the statistics described above.
  if (native::runtime_batch_norm(op, stack)) return;
  if (host_addressable()) {
    run_on_host_aliases(op, stack);  // ATen's CPU kernel insists on CPU tensors: host aliases
  } else {
    run_cpu_fallback(op, stack);
  }
  const bool stats = running_mean.has_value() && running_mean->defined() && running_var.has_value() &&
                     running_var->defined();
  if (training || !stats) {
    return;
  }
  const auto out_base = stack->size() - 3;
  const auto compute = at::toOpMathType(input.scalar_type());
  (*stack)[out_base + 1] = running_mean->to(compute, /*non_blocking=*/false, /*copy=*/true);
  (*stack)[out_base + 2] = (running_var->to(compute) + eps).rsqrt();
}

// native_batch_norm_backward(grad_out, input, weight, running_mean, running_var,
// save_mean, save_invstd, train, eps, output_mask). In inference mode the
// statistics above are the running ones in the computation dtype, which ATen's
// CPU kernel refuses beside a reduced-precision input; it reads the running
// statistics then, so it gets the empty ones its own forward would have given.
void batch_norm_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto base = stack->size() - op.schema().arguments().size();
  if (!(*stack)[base + 7].toBool()) {
    (*stack)[base + 5] = c10::IValue();
    (*stack)[base + 6] = c10::IValue();
  }
  if (native::runtime_batch_norm_backward(op, stack)) return;
  if (host_addressable()) {
    run_on_host_aliases(op, stack);
  } else {
    run_cpu_fallback(op, stack);
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", torch::CppFunction::makeFromBoxedFunction<&batch_norm>());
  m.impl("_native_batch_norm_legit", torch::CppFunction::makeFromBoxedFunction<&batch_norm>());
  m.impl("native_batch_norm_backward", torch::CppFunction::makeFromBoxedFunction<&batch_norm_backward>());
}

}  // namespace kernel_pytorch
