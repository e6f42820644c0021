// Reductions: ATen's structured CPU kernels on my_asic tensors (host_kernels.h).
#include <ATen/ops/all_native.h>
#include <ATen/ops/amax_native.h>
#include <ATen/ops/any_native.h>
#include <ATen/ops/argmax_native.h>
#include <ATen/ops/mean_native.h>
#include <ATen/ops/sum_native.h>

#include <ATen/ops/sum.h>
#include <c10/core/WrapDimMinimal.h>

#include "structured.h"

namespace kernel_pytorch::native {

// Ops whose CUDA wrappers check every tensor (device_check.h).
template <>
inline constexpr bool exact_same_device<at::native::structured_amax_out> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_argmax_out> = true;
namespace {

using Dims = at::OptionalIntArrayRef;
using Dtype = std::optional<at::ScalarType>;

// ATen has no CPU kernel behind mean_stub: its CPU mean is a sum divided by
// the count (float accumulation for half types), reproduced here so my_asic
// gives the CPU's results.
void mean_into(const at::Tensor& self, Dims dim, bool keepdim, Dtype dtype, at::Tensor& result) {
  int64_t count = 1;
  if (dim.has_value() && !dim->empty()) {
    for (int64_t d : *dim) {
      count *= self.dim() == 0 ? 1 : self.size(c10::maybe_wrap_dim(d, self.dim()));
    }
  } else {
    count = self.numel();
  }
  const at::ScalarType out_dtype = result.scalar_type();
  const bool half = out_dtype == at::kHalf || out_dtype == at::kBFloat16;
  if (half) {
    at::Tensor acc = result.to(at::kFloat);
    at::sum_out(acc, self, dim, keepdim, at::kFloat).div_(count);
    result.copy_(acc);
  } else {
    at::sum_out(result, self, dim, keepdim, out_dtype).div_(count);
  }
}

at::Tensor mean_dim(const at::Tensor& self, Dims dim, bool keepdim, Dtype dtype) {
  const HostKernelScope scope(self);
  structured::Functional<at::native::structured_mean_out, 1> op;
  op.meta(self, dim, keepdim, dtype); // checks and the output's shape and dtype
  at::Tensor result = op.take(0);
  mean_into(self, dim, keepdim, dtype, result);
  return result;
}

at::Tensor& mean_out(const at::Tensor& self, Dims dim, bool keepdim, Dtype dtype, at::Tensor& result) {
  const HostKernelScope scope(self, detail::Written{result});
  structured::Given<at::native::structured_mean_out, 1, false> op(result);
  op.meta(self, dim, keepdim, dtype);
  at::Tensor target = op.maybe_get_output(0);
  mean_into(self, dim, keepdim, dtype, target);
  op.finish();
  return result;
}

} // namespace

void register_reductions(Registrar& r) {
  using namespace at::native;
  using T = const at::Tensor&;
  r.impl("sum.dim_IntList", TORCH_FN((Op<structured_sum_out, T, Dims, bool, Dtype>::functional)));
  r.impl("sum.IntList_out", TORCH_FN((Op<structured_sum_out, T, Dims, bool, Dtype>::out)));
  r.impl("mean.dim", TORCH_FN(mean_dim));
  r.impl("mean.out", TORCH_FN(mean_out));
  r.impl("all.dim", TORCH_FN((Op<structured_all_out, T, int64_t, bool>::functional)));
  r.impl("all.out", TORCH_FN((Op<structured_all_out, T, int64_t, bool>::out)));
  r.impl("all", TORCH_FN((Op<structured_all_all_out, T>::functional)));
  r.impl("all.all_out", TORCH_FN((Op<structured_all_all_out, T>::out)));
  r.impl("any.dim", TORCH_FN((Op<structured_any_out, T, int64_t, bool>::functional)));
  r.impl("any.out", TORCH_FN((Op<structured_any_out, T, int64_t, bool>::out)));
  r.impl("any", TORCH_FN((Op<structured_any_all_out, T>::functional)));
  r.impl("any.all_out", TORCH_FN((Op<structured_any_all_out, T>::out)));
  r.impl("amax", TORCH_FN((Op<structured_amax_out, T, at::IntArrayRef, bool>::functional)));
  r.impl("amax.out", TORCH_FN((Op<structured_amax_out, T, at::IntArrayRef, bool>::out)));
  r.impl("argmax", TORCH_FN((Op<structured_argmax_out, T, std::optional<int64_t>, bool>::functional)));
  r.impl("argmax.out", TORCH_FN((Op<structured_argmax_out, T, std::optional<int64_t>, bool>::out)));
}

} // namespace kernel_pytorch::native
