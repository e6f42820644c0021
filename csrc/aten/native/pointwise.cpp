// Elementwise arithmetic, comparisons and activations: ATen's structured CPU
// kernels on my_asic tensors (host_kernels.h).
#include <ATen/ops/abs_native.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/bitwise_and_native.h>
#include <ATen/ops/bitwise_not_native.h>
#include <ATen/ops/bitwise_or_native.h>
#include <ATen/ops/bitwise_xor_native.h>
#include <ATen/ops/logical_not_native.h>
#include <ATen/ops/nan_to_num_native.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/gelu_backward_native.h>
#include <ATen/ops/gelu_native.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/isneginf_native.h>
#include <ATen/ops/isposinf_native.h>
#include <ATen/ops/le_native.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/lt_native.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/minimum_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/ne_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/reciprocal_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/sigmoid_backward_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_backward_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/where_native.h>

#include "structured.h"

namespace kernel_pytorch::native {

// Ops whose CUDA wrappers check every tensor (device_check.h).
template <>
inline constexpr bool exact_same_device<at::native::structured_threshold_backward_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_sigmoid_backward_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_tanh_backward_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_gelu_backward_out_cpu> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_silu_backward_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_clamp_min_Tensor_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_isneginf_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_isposinf_out> = true;
namespace {

using T = const at::Tensor&;
using S = const at::Scalar&;

} // namespace

void register_pointwise(Registrar& r) {
  using namespace at::native;
  using OptStr = std::optional<c10::string_view>;
  // Binary arithmetic.
  all_forms<structured_ufunc_add_CPU, T, S>(r, "add.Tensor", "add.out", "add_.Tensor");
  all_forms<structured_sub_out, T, S>(r, "sub.Tensor", "sub.out", "sub_.Tensor");
  all_forms<structured_mul_out, T>(r, "mul.Tensor", "mul.out", "mul_.Tensor");
  all_forms<structured_div_out, T>(r, "div.Tensor", "div.out", "div_.Tensor");
  all_forms<structured_div_out_mode, T, OptStr>(r, "div.Tensor_mode", "div.out_mode", "div_.Tensor_mode");
  all_forms<structured_maximum_out, T>(r, "maximum", "maximum.out", nullptr);
  all_forms<structured_minimum_out, T>(r, "minimum", "minimum.out", nullptr);
  all_forms<structured_addcmul_out, T, T, S>(r, "addcmul", "addcmul.out", "addcmul_");
  all_forms<structured_addcdiv_out, T, T, S>(r, "addcdiv", "addcdiv.out", "addcdiv_");
  all_forms<structured_lerp_Scalar, T, S>(r, "lerp.Scalar", "lerp.Scalar_out", "lerp_.Scalar");
  all_forms<structured_lerp_Tensor, T, T>(r, "lerp.Tensor", "lerp.Tensor_out", "lerp_.Tensor");
  all_forms<structured_pow_Tensor_Scalar_out, S>(r, "pow.Tensor_Scalar", "pow.Tensor_Scalar_out", "pow_.Scalar");
  all_forms<structured_pow_Tensor_Tensor_out, T>(r, "pow.Tensor_Tensor", "pow.Tensor_Tensor_out", "pow_.Tensor");
  all_forms<structured_clamp_min_out, S>(r, "clamp_min", "clamp_min.out", "clamp_min_");
  all_forms<structured_clamp_min_Tensor_out, T>(r, "clamp_min.Tensor", "clamp_min.Tensor_out", "clamp_min_.Tensor");

  // Comparisons.
  all_forms<structured_eq_Scalar_out, S>(r, "eq.Scalar", "eq.Scalar_out", "eq_.Scalar");
  all_forms<structured_eq_Tensor_out, T>(r, "eq.Tensor", "eq.Tensor_out", "eq_.Tensor");
  all_forms<structured_ne_Scalar_out, S>(r, "ne.Scalar", "ne.Scalar_out", "ne_.Scalar");
  all_forms<structured_ne_Tensor_out, T>(r, "ne.Tensor", "ne.Tensor_out", "ne_.Tensor");
  all_forms<structured_lt_Scalar_out, S>(r, "lt.Scalar", "lt.Scalar_out", "lt_.Scalar");
  all_forms<structured_lt_Tensor_out, T>(r, "lt.Tensor", "lt.Tensor_out", "lt_.Tensor");
  all_forms<structured_le_Scalar_out, S>(r, "le.Scalar", "le.Scalar_out", "le_.Scalar");
  all_forms<structured_le_Tensor_out, T>(r, "le.Tensor", "le.Tensor_out", "le_.Tensor");
  all_forms<structured_gt_Scalar_out, S>(r, "gt.Scalar", "gt.Scalar_out", "gt_.Scalar");
  all_forms<structured_gt_Tensor_out, T>(r, "gt.Tensor", "gt.Tensor_out", "gt_.Tensor");
  all_forms<structured_ge_Scalar_out, S>(r, "ge.Scalar", "ge.Scalar_out", "ge_.Scalar");
  all_forms<structured_ge_Tensor_out, T>(r, "ge.Tensor", "ge.Tensor_out", "ge_.Tensor");
  all_forms<structured_bitwise_and_out, T>(r, "bitwise_and.Tensor", "bitwise_and.Tensor_out", "bitwise_and_.Tensor");
  all_forms<structured_bitwise_or_out, T>(r, "bitwise_or.Tensor", "bitwise_or.Tensor_out", "bitwise_or_.Tensor");
  all_forms<structured_bitwise_not_out>(r, "bitwise_not", "bitwise_not.out", "bitwise_not_");
  all_forms<structured_bitwise_xor_out, T>(r, "bitwise_xor.Tensor", "bitwise_xor.Tensor_out", "bitwise_xor_.Tensor");
  r.impl("logical_not", TORCH_FN((HostKernel<&at::native::logical_not>::call)));
  r.impl("logical_not.out", TORCH_FN((HostKernel<&at::native::logical_not_out>::call)));
  r.impl("logical_not_", TORCH_FN((HostKernel<&at::native::logical_not_>::call)));
  r.impl("nan_to_num", TORCH_FN((HostKernel<&at::native::nan_to_num>::call)));
  r.impl("nan_to_num.out", TORCH_FN((HostKernel<&at::native::nan_to_num_out>::call)));
  r.impl("nan_to_num_", TORCH_FN((HostKernel<&at::native::nan_to_num_>::call)));
  all_forms<structured_isneginf_out>(r, "isneginf", "isneginf.out", nullptr);
  all_forms<structured_isposinf_out>(r, "isposinf", "isposinf.out", nullptr);
  using Where = at::Tensor (*)(T, T, T);
  r.impl("where.self", TORCH_FN((HostKernel<static_cast<Where>(&at::native::where)>::call)));
  r.impl("where.self_out", TORCH_FN((HostKernel<&at::native::where_self_out>::call)));

  // Unary math.
  all_forms<structured_sqrt_out>(r, "sqrt", "sqrt.out", "sqrt_");
  all_forms<structured_rsqrt_out>(r, "rsqrt", "rsqrt.out", "rsqrt_");
  all_forms<structured_exp_out>(r, "exp", "exp.out", "exp_");
  all_forms<structured_log_out>(r, "log", "log.out", "log_");
  all_forms<structured_neg_out>(r, "neg", "neg.out", "neg_");
  all_forms<structured_reciprocal_out>(r, "reciprocal", "reciprocal.out", "reciprocal_");
  all_forms<structured_sin_out>(r, "sin", "sin.out", "sin_");
  all_forms<structured_cos_out>(r, "cos", "cos.out", "cos_");
  r.impl("abs", TORCH_FN((HostKernel<static_cast<at::Tensor (*)(T)>(&at::native::abs)>::call)));
  r.impl("abs.out", TORCH_FN((HostKernel<&at::native::abs_out>::call)));
  r.impl("abs_", TORCH_FN((HostKernel<&at::native::abs_>::call)));

  // Activations and their backward formulas.
  r.impl("relu", TORCH_FN((HostKernel<&at::native::relu>::call)));
  r.impl("relu_", TORCH_FN((HostKernel<&at::native::relu_>::call)));
  all_forms<structured_threshold_backward_out, T, S>(
      r, "threshold_backward", "threshold_backward.grad_input", nullptr);
  all_forms<structured_sigmoid_out>(r, "sigmoid", "sigmoid.out", "sigmoid_");
  all_forms<structured_tanh_out>(r, "tanh", "tanh.out", "tanh_");
  all_forms<structured_sigmoid_backward_out, T>(r, "sigmoid_backward", "sigmoid_backward.grad_input", nullptr);
  all_forms<structured_tanh_backward_out, T>(r, "tanh_backward", "tanh_backward.grad_input", nullptr);
  all_forms<structured_gelu_out_cpu, c10::string_view>(r, "gelu", "gelu.out", "gelu_");
  all_forms<structured_gelu_backward_out_cpu, T, c10::string_view>(
      r, "gelu_backward", "gelu_backward.grad_input", nullptr);
  all_forms<structured_silu_out>(r, "silu", "silu.out", "silu_");
  all_forms<structured_silu_backward_out, T>(r, "silu_backward", "silu_backward.grad_input", nullptr);
}

} // namespace kernel_pytorch::native
