// native_group_norm_backward on my_asic when device memory is not host
// addressable. The forward is ATen's composite (math_group_norm: reshapes,
// batch statistics, pointwise), so it already runs on the device; the
// backward has only CPU and CUDA kernels and fell back. It is composed here
// from ops that run through the runtime's pointwise and reduce entries, in
// float32, per group g of D = C / group channels over HxW positions:
//   xhat   = (x - mean) * rstd,   dy' = dy * gamma (per channel)
//   dx     = rstd * (dy' - mean_g(dy') - xhat * mean_g(dy' * xhat))
//   dgamma = sum_{N, HxW}(dy * xhat),   dbeta = sum_{N, HxW}(dy)
// (mean_g over the group's D * HxW elements). Inputs ATen rejects, and
// NOT_SUPPORTED answers, run through the counted CPU fallback.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <array>
#include <tuple>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;
using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

bool on_device(T t, c10::Device device) {
  return t.defined() && t.device() == device && t.layout() == at::kStrided && entry_float(t.scalar_type());
}

Grads group_norm_backward(T dy, T x, T mean, T rstd, const std::optional<at::Tensor>& weight, c10::SymInt N_,
                          c10::SymInt C_, c10::SymInt HxW_, int64_t group, std::array<bool, 3> mask) {
  const int64_t N = N_.guard_int(__FILE__, __LINE__), C = C_.guard_int(__FILE__, __LINE__),
                HxW = HxW_.guard_int(__FILE__, __LINE__);
  const c10::Device device = x.device();
  const bool has_weight = weight.has_value() && weight->defined();
  const bool eligible = device.type() == c10::DeviceType::PrivateUse1 && on_device(dy, device) &&
                        on_device(x, device) && on_device(mean, device) && on_device(rstd, device) &&
                        (!has_weight || on_device(*weight, device)) && group > 0 && C % group == 0 &&
                        x.numel() == N * C * HxW && dy.numel() == x.numel() && mean.numel() == N * group &&
                        rstd.numel() == N * group && (!has_weight || weight->numel() == C) && x.numel() > 0;
  if (!eligible) {
    return run_on_fallback<Grads, T, T, T, T, const std::optional<at::Tensor>&, c10::SymInt, c10::SymInt,
                           c10::SymInt, int64_t, std::array<bool, 3>>(
        kernel_key(&group_norm_backward), dy, x, mean, rstd, weight, N_, C_, HxW_, group, mask);
  }
  c10::DeviceGuard guard(device);
  const int64_t D = C / group;
  // (N, group, D, HxW) views in float32.
  const at::Tensor xf = x.to(at::kFloat).reshape({N, group, D, HxW});
  const at::Tensor dyf = dy.to(at::kFloat).reshape({N, group, D, HxW});
  const at::Tensor mu = mean.to(at::kFloat).reshape({N, group, 1, 1});
  const at::Tensor rs = rstd.to(at::kFloat).reshape({N, group, 1, 1});
  const at::Tensor xhat = (xf - mu) * rs;
  at::Tensor dx, dgamma, dbeta;
  if (mask[0]) {
    const at::Tensor g = has_weight ? dyf * weight->to(at::kFloat).reshape({1, group, D, 1}) : dyf;
    const std::array<int64_t, 2> inner{2, 3};
    const at::Tensor mean_g = g.mean(inner, /*keepdim=*/true);
    const at::Tensor mean_gx = (g * xhat).mean(inner, /*keepdim=*/true);
    dx = (rs * (g - mean_g - xhat * mean_gx)).reshape(x.sizes()).to(x.scalar_type());
  }
  const std::array<int64_t, 2> outer{0, 3};
  const at::ScalarType param_type = has_weight ? weight->scalar_type() : x.scalar_type();
  if (mask[1]) dgamma = (dyf * xhat).sum(outer).reshape({C}).to(param_type);
  if (mask[2]) dbeta = dyf.sum(outer).reshape({C}).to(param_type);
  return {dx, dgamma, dbeta};
}

}  // namespace

void register_runtime_group_norm(Registrar& r) {
  if (runtime_kernels().pointwise == nullptr || runtime_kernels().reduce == nullptr) return;
  r.impl("native_group_norm_backward", TORCH_FN(group_norm_backward));
}

}  // namespace kernel_pytorch::native
