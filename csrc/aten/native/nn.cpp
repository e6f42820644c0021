// Softmax, losses, normalisation, pooling, dropout and embedding gradients:
// ATen's CPU kernels on my_asic tensors (host_kernels.h).
#include <ATen/ops/_log_softmax_backward_data_native.h>
#include <ATen/ops/_log_softmax_native.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/embedding_dense_backward_native.h>
#include <ATen/ops/max_pool2d_with_indices_backward_native.h>
#include <ATen/ops/max_pool2d_with_indices_native.h>
#include <ATen/ops/native_dropout_backward_native.h>
#include <ATen/ops/native_dropout_native.h>
#include <ATen/ops/native_layer_norm_backward_native.h>
#include <ATen/ops/native_layer_norm_native.h>
#include <ATen/ops/nll_loss_backward_native.h>
#include <ATen/ops/nll_loss_forward_native.h>

#include "structured.h"

namespace kernel_pytorch::native {

// Ops whose CUDA wrappers check every tensor (device_check.h).
template <>
inline constexpr bool exact_same_device<at::native::structured_log_softmax_cpu_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_log_softmax_backward_cpu_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_softmax_cpu_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_softmax_backward_cpu_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_max_pool2d_with_indices_out_cpu> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_max_pool2d_with_indices_backward_out_cpu> = true;
namespace {

using T = const at::Tensor&;
using OptT = const std::optional<at::Tensor>&;
using at::native::structured_nll_loss_backward_out_cpu;
using at::native::structured_nll_loss_forward_out_cpu;

at::OptionalTensorRef ref(OptT t) {
  return t.has_value() && t->defined() ? at::OptionalTensorRef(*t) : at::OptionalTensorRef();
}

std::tuple<at::Tensor, at::Tensor> nll_loss_forward(
    T self, T target, OptT weight, int64_t reduction, c10::SymInt ignore_index) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, self, target, weight);
  const int64_t ignore = ignore_index.guard_int(__FILE__, __LINE__);
  structured::Functional<structured_nll_loss_forward_out_cpu, 2> op;
  op.meta(self, target, ref(weight), reduction, ignore);
  op.impl(self, target, ref(weight), reduction, ignore, op.maybe_get_output(0), op.maybe_get_output(1));
  return {op.take(0), op.take(1)};
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(
    T self, T target, OptT weight, int64_t reduction, c10::SymInt ignore_index, at::Tensor& output,
    at::Tensor& total_weight) {
  const HostKernelScope scope(
      detail::DeviceRuleTag<true>{}, self, target, weight, detail::Written{output}, detail::Written{total_weight});
  const int64_t ignore = ignore_index.guard_int(__FILE__, __LINE__);
  structured::Given<structured_nll_loss_forward_out_cpu, 2, false> op(output, total_weight);
  op.meta(self, target, ref(weight), reduction, ignore);
  op.impl(self, target, ref(weight), reduction, ignore, op.maybe_get_output(0), op.maybe_get_output(1));
  op.finish();
  return {output, total_weight};
}

at::Tensor nll_loss_backward(
    T grad_output, T self, T target, OptT weight, int64_t reduction, c10::SymInt ignore_index, T total_weight) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, grad_output, self, target, weight, total_weight);
  const int64_t ignore = ignore_index.guard_int(__FILE__, __LINE__);
  structured::Functional<structured_nll_loss_backward_out_cpu, 1> op;
  op.meta(grad_output, self, target, ref(weight), reduction, ignore, total_weight);
  op.impl(grad_output, self, target, ref(weight), reduction, ignore, total_weight, op.maybe_get_output(0));
  return op.take(0);
}

at::Tensor& nll_loss_backward_out(
    T grad_output, T self, T target, OptT weight, int64_t reduction, c10::SymInt ignore_index, T total_weight,
    at::Tensor& grad_input) {
  const HostKernelScope scope(
      detail::DeviceRuleTag<true>{}, grad_output, self, target, weight, total_weight, detail::Written{grad_input});
  const int64_t ignore = ignore_index.guard_int(__FILE__, __LINE__);
  structured::Given<structured_nll_loss_backward_out_cpu, 1, false> op(grad_input);
  op.meta(grad_output, self, target, ref(weight), reduction, ignore, total_weight);
  op.impl(grad_output, self, target, ref(weight), reduction, ignore, total_weight, op.maybe_get_output(0));
  op.finish();
  return grad_input;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    T input, c10::SymIntArrayRef normalized_shape, OptT weight, OptT bias, double eps) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, input, weight, bias);
  return at::native::layer_norm_cpu(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    T grad_out, T input, c10::SymIntArrayRef normalized_shape, T mean, T rstd, OptT weight, OptT bias,
    std::array<bool, 3> output_mask) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, grad_out, input, mean, rstd, weight, bias);
  return at::native::layer_norm_backward_cpu(
      grad_out, input, C10_AS_INTARRAYREF_SLOW(normalized_shape), mean, rstd, weight, bias, output_mask);
}

at::Tensor embedding_dense_backward(
    T grad_output, T indices, c10::SymInt num_weights, c10::SymInt padding_idx, bool scale_grad_by_freq) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, grad_output, indices);
  return at::native::embedding_dense_backward_cpu(
      grad_output, indices, num_weights.guard_int(__FILE__, __LINE__), padding_idx.guard_int(__FILE__, __LINE__),
      scale_grad_by_freq);
}

} // namespace

void register_nn(Registrar& r) {
  using namespace at::native;
  using Ints = at::IntArrayRef;
  using LogSoftmax = Op<structured_log_softmax_cpu_out, T, int64_t, bool>;
  using LogSoftmaxBackward = Op<structured_log_softmax_backward_cpu_out, T, T, int64_t, at::ScalarType>;
  using Softmax = Op<structured_softmax_cpu_out, T, int64_t, bool>;
  using SoftmaxBackward = Op<structured_softmax_backward_cpu_out, T, T, int64_t, at::ScalarType>;
  r.impl("_log_softmax", TORCH_FN(LogSoftmax::functional));
  r.impl("_log_softmax.out", TORCH_FN(LogSoftmax::out));
  r.impl("_log_softmax_backward_data", TORCH_FN(LogSoftmaxBackward::functional));
  r.impl("_log_softmax_backward_data.out", TORCH_FN(LogSoftmaxBackward::out));
  r.impl("_softmax", TORCH_FN(Softmax::functional));
  r.impl("_softmax.out", TORCH_FN(Softmax::out));
  r.impl("_softmax_backward_data", TORCH_FN(SoftmaxBackward::functional));
  r.impl("_softmax_backward_data.out", TORCH_FN(SoftmaxBackward::out));

  r.impl("nll_loss_forward", TORCH_FN(nll_loss_forward));
  r.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  r.impl("nll_loss_backward", TORCH_FN(nll_loss_backward));
  r.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out));

  r.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  r.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  // ATen's CPU batch norm checks that its tensors are CPU tensors: it runs on
  // host aliases of the device memory (the forwards with running statistics:
  // and the backward: aten/batch_norm.cpp, in both memory modes).
  for (const char* name : {"_native_batch_norm_legit.no_stats"}) {
    r.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_on_host_aliases>());
  }

  using MaxPool = Op2<structured_max_pool2d_with_indices_out_cpu, T, Ints, Ints, Ints, Ints, bool>;
  using MaxPoolBackward = Op<structured_max_pool2d_with_indices_backward_out_cpu, T, T, Ints, Ints, Ints, Ints, bool, T>;
  r.impl("max_pool2d_with_indices", TORCH_FN(MaxPool::functional));
  r.impl("max_pool2d_with_indices.out", TORCH_FN(MaxPool::out));
  r.impl("max_pool2d_with_indices_backward", TORCH_FN(MaxPoolBackward::functional));
  r.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(MaxPoolBackward::out));

  r.impl("native_dropout", TORCH_FN((ExactSameHostKernel<&at::native::native_dropout_cpu>::call)));
  r.impl("native_dropout_backward", TORCH_FN((ExactSameHostKernel<&at::native::native_dropout_backward>::call)));
  r.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
}

} // namespace kernel_pytorch::native
