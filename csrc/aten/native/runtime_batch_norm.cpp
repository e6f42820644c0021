// Batch norm forward (training: batch statistics and the running-statistics
// update; inference) and backward, composed of the runtime's pointwise and
// reduce entries when device memory is not host addressable: no entry of its
// own. Statistics are float32 whatever the input's dtype (ATen's opmath),
// two-pass (the mean, then the mean of squared deviations), and the output
// is computed from x - mean rather than x * scale + shift, which would lose
// precision where |mean| >> std. Each step is an ATen op that the glue routes
// to an entry; one the entries cannot take falls back by itself.
#include "runtime_conv.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <optional>
#include <vector>

#include "core/core.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

// A per-channel tensor the composition may take: [C], on input's device, a float dtype.
bool channel_tensor(const std::optional<at::Tensor>& t, const at::Tensor& input) {
  if (!t.has_value() || !t->defined()) return true;
  return t->layout() == at::kStrided && t->device() == input.device() && entry_float(t->scalar_type()) &&
         !t->is_neg() && !t->is_conj() && t->dim() == 1 && t->size(0) == input.size(1);
}

bool defined(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined();
}

bool eligible(const at::Tensor& input) {
  const kpdrKernelTable& kernels = runtime_kernels();
  return !host_addressable() && kernels.pointwise != nullptr && kernels.reduce != nullptr && input.defined() &&
         input.device().type() == c10::DeviceType::PrivateUse1 && input.layout() == at::kStrided &&
         entry_float(input.scalar_type()) && !input.is_neg() && !input.is_conj() && input.dim() >= 2 &&
         input.dim() <= KPDR_MAX_DIMS && input.numel() > 0;
}

// The dimensions statistics reduce over (all but the channels) and the [1, C, 1, ...] shape.
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

std::vector<int64_t> channel_shape(const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return shape;
}

// The inference statistics: the running mean and 1 / sqrt(running_var + eps), float32.
std::pair<at::Tensor, at::Tensor> running_statistics(const at::Tensor& mean, const at::Tensor& var, double eps) {
  return {mean.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true), at::rsqrt(at::add(var.to(at::kFloat), eps))};
}

}  // namespace

bool runtime_batch_norm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // (input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  if (n != 8 || !(*stack)[base].isTensor()) return false;
  const at::Tensor input = (*stack)[base].toTensor();
  if (!eligible(input)) return false;
  const auto weight = (*stack)[base + 1].toOptional<at::Tensor>();
  const auto bias = (*stack)[base + 2].toOptional<at::Tensor>();
  const auto running_mean = (*stack)[base + 3].toOptional<at::Tensor>();
  const auto running_var = (*stack)[base + 4].toOptional<at::Tensor>();
  const bool training = (*stack)[base + 5].toBool();
  const double momentum = (*stack)[base + 6].toDouble();
  const double eps = (*stack)[base + 7].toDouble();
  for (const auto* t : {&weight, &bias, &running_mean, &running_var}) {
    if (!channel_tensor(*t, input)) return false;
  }
  const int64_t count = input.numel() / input.size(1);  // values per channel
  // Inference needs running statistics; training with one value per channel
  // divides by zero in the unbiased variance. ATen decides both (fallback).
  if (!training && !(defined(running_mean) && defined(running_var))) return false;
  if (training && count < 2 && (defined(running_mean) || defined(running_var))) return false;
  c10::DeviceGuard guard(input.device());
  const auto dims = reduced_dims(input);
  const auto shape = channel_shape(input);
  at::Tensor mean, invstd, centred;
  if (training) {
    mean = at::mean(input, dims, /*keepdim=*/false, at::kFloat);
    centred = at::sub(input, mean.view(shape));
    const at::Tensor var = at::mean(at::mul(centred, centred), dims);
    invstd = at::rsqrt(at::add(var, eps));
    // running = (1 - momentum) * running + momentum * statistic (the unbiased
    // variance), in float32 and rounded once into the statistics' dtype, as ATen does.
    auto update = [&](const at::Tensor& running, const at::Tensor& statistic, double weight) {
      running.copy_(at::add(at::mul(running.to(at::kFloat), 1.0 - momentum), statistic, weight));
    };
    if (defined(running_mean)) update(*running_mean, mean, momentum);
    if (defined(running_var)) {
      update(*running_var, var, momentum * static_cast<double>(count) / static_cast<double>(count - 1));
    }
  } else {
    std::tie(mean, invstd) = running_statistics(*running_mean, *running_var, eps);
    centred = at::sub(input, mean.view(shape));
  }
  const at::Tensor scale = defined(weight) ? at::mul(invstd, *weight) : invstd;
  at::Tensor out = defined(bias) ? at::addcmul(bias->view(shape), centred, scale.view(shape))
                                 : at::mul(centred, scale.view(shape));
  if (out.scalar_type() != input.scalar_type()) out = out.to(input.scalar_type());
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(out), std::move(mean), std::move(invstd));
  return true;
}

bool runtime_batch_norm_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // (grad_out, input, weight?, running_mean?, running_var?, save_mean?, save_invstd?, train, eps, output_mask)
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  if (n != 10 || !(*stack)[base].isTensor() || !(*stack)[base + 1].isTensor()) return false;
  const at::Tensor grad = (*stack)[base].toTensor();
  const at::Tensor input = (*stack)[base + 1].toTensor();
  if (!eligible(input) || !grad.defined() || grad.device() != input.device() || grad.layout() != at::kStrided ||
      !entry_float(grad.scalar_type()) || grad.is_neg() || grad.is_conj() || grad.sizes() != input.sizes()) {
    return false;
  }
  const auto weight = (*stack)[base + 2].toOptional<at::Tensor>();
  const auto running_mean = (*stack)[base + 3].toOptional<at::Tensor>();
  const auto running_var = (*stack)[base + 4].toOptional<at::Tensor>();
  const auto save_mean = (*stack)[base + 5].toOptional<at::Tensor>();
  const auto save_invstd = (*stack)[base + 6].toOptional<at::Tensor>();
  const bool train = (*stack)[base + 7].toBool();
  const double eps = (*stack)[base + 8].toDouble();
  const auto mask_list = (*stack)[base + 9].toBoolList();
  if (mask_list.size() != 3) return false;
  const bool mask[3] = {mask_list[0], mask_list[1], mask_list[2]};
  for (const auto* t : {&weight, &running_mean, &running_var, &save_mean, &save_invstd}) {
    if (!channel_tensor(*t, input)) return false;
  }
  if (train ? !(defined(save_mean) && defined(save_invstd)) : !(defined(running_mean) && defined(running_var))) {
    return false;
  }
  c10::DeviceGuard guard(input.device());
  const auto dims = reduced_dims(input);
  const auto shape = channel_shape(input);
  at::Tensor mean, invstd;
  if (train) {
    mean = save_mean->to(at::kFloat);
    invstd = save_invstd->to(at::kFloat);
  } else {
    std::tie(mean, invstd) = running_statistics(*running_mean, *running_var, eps);
  }
  const bool needs_sums = mask[1] || mask[2] || (mask[0] && train);
  at::Tensor centred, grad_sum, dot;
  if (needs_sums) {
    grad_sum = at::sum(grad, dims, /*keepdim=*/false, at::kFloat);
    if (mask[1] || (mask[0] && train)) {
      centred = at::sub(input, mean.view(shape));
      dot = at::sum(at::mul(grad, centred), dims, /*keepdim=*/false, at::kFloat);
    }
  }
  const at::ScalarType param_type = defined(weight) ? weight->scalar_type() : input.scalar_type();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) {
    const at::Tensor a = defined(weight) ? at::mul(invstd, *weight) : invstd;  // invstd * w
    at::Tensor g;
    if (train) {
      // a * (grad - sum(grad) / count - centred * invstd^2 * dot / count)
      const double count = static_cast<double>(input.numel() / input.size(1));
      const at::Tensor coef_centred = at::mul(at::mul(at::mul(a, invstd), at::mul(invstd, dot)), -1.0 / count);
      const at::Tensor coef_const = at::mul(at::mul(a, grad_sum), -1.0 / count);
      g = at::addcmul(at::addcmul(coef_const.view(shape), grad, a.view(shape)), centred, coef_centred.view(shape));
    } else {
      g = at::mul(grad, a.view(shape));
    }
    grad_input = g.scalar_type() == input.scalar_type() ? g : g.to(input.scalar_type());
  }
  if (mask[1]) grad_weight = at::mul(dot, invstd).to(param_type);
  if (mask[2]) grad_bias = grad_sum.to(param_type);
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(grad_input), std::move(grad_weight), std::move(grad_bias));
  return true;
}

}  // namespace kernel_pytorch::native
