// sum, mean, amax and amin (and max()/min() of a whole tensor) over a set of
// dimensions through the runtime's reduce entry (kpdrKernelTable::reduce)
// when device memory is not host addressable. The result is allocated
// contiguous in its final shape; the entry gets the input's strides and, per
// kept dimension, the result's. Bool and integer extremes compare exactly in
// int64 (their sums: runtime_statistics.cpp). What the entry cannot take
// (more than KPDR_MAX_DIMS dimensions; bad or repeated dims, empty
// amax/amin, for which ATen's fallback raises its errors; a NOT_SUPPORTED
// answer) runs through the counted CPU fallback.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <c10/core/DeviceGuard.h>

#include <bitset>
#include <optional>
#include <tuple>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;

}  // namespace

// (runtime_pointwise.h; runtime_statistics.cpp shares these)
bool reduce_eligible(T self) {
  return self.defined() && self.device().type() == c10::DeviceType::PrivateUse1 &&
         self.layout() == at::kStrided && !self.is_neg() && !self.is_conj() && entry_float(self.scalar_type()) &&
         self.dim() <= KPDR_MAX_DIMS;
}

bool reduce_integer_eligible(T self) {
  return self.defined() && self.device().type() == c10::DeviceType::PrivateUse1 && self.layout() == at::kStrided &&
         entry_integer(self.scalar_type()) && self.dim() <= KPDR_MAX_DIMS;
}

// op over the dimensions of `mask` into a new tensor of `out_type` (kLong for
// the arg-reductions and integer sums); undefined when the entry cannot take the call.
at::Tensor reduce_into_new(T self, uint32_t mask, bool keepdim, at::ScalarType out_type, int32_t op, double correction) {
  const kpdrKernelTable& kernels = runtime_kernels();
  const bool arg = op == KPDR_REDUCE_ARGMAX || op == KPDR_REDUCE_ARGMIN;
  const bool to_long = arg || (out_type == at::kLong && (op == KPDR_REDUCE_SUM || op == KPDR_REDUCE_AMAX ||
                                                         op == KPDR_REDUCE_AMIN));
  if (kernels.reduce == nullptr || (to_long ? out_type != at::kLong : !entry_float(out_type))) return at::Tensor();
  const int64_t nd = self.dim();
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < nd; ++d) {
    if (!(mask & (1u << d))) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  at::Tensor result = at::empty(shape, self.options().dtype(out_type));
  kpdrReduceArgs args{};
  args.op = op;
  args.ndim = static_cast<int32_t>(nd);
  args.reduce_mask = mask;
  switch (self.scalar_type()) {
    case at::kLong: args.in_dtype = KPDR_DTYPE_INT64; break;
    case at::kInt: args.in_dtype = KPDR_DTYPE_INT32; break;
    default: args.in_dtype = *entry_dtype(self.scalar_type());
  }
  args.out_dtype = to_long ? KPDR_DTYPE_INT64 : *entry_dtype(out_type);
  args.correction = correction;
  int64_t j = 0;
  for (int64_t d = 0; d < nd; ++d) {
    args.sizes[d] = self.size(d);
    args.in_strides[d] = self.stride(d);
    const bool reduced = mask & (1u << d);
    if (!reduced || keepdim) {
      args.out_strides[d] = reduced ? 0 : result.stride(j);
      ++j;
    }
  }
  c10::DeviceGuard guard(self.device());
  if (result.numel() == 0) return result;
  args.in = self.numel() > 0 ? self.const_data_ptr() : nullptr;
  args.out = result.mutable_data_ptr();
  if (!launch_kernel(kernels.reduce, args, current_stream(self.device().index()))) return at::Tensor();
  return result;
}

std::optional<uint32_t> reduce_mask(T self, at::IntArrayRef dims) {
  const int64_t nd = self.dim();
  if (dims.empty()) return nd == 0 ? 0u : static_cast<uint32_t>((1ull << nd) - 1);
  uint32_t mask = 0;
  for (int64_t d : dims) {
    const int64_t bound = std::max<int64_t>(nd, 1);
    if (d < -bound || d >= bound) return std::nullopt;
    const int64_t w = nd == 0 ? 0 : (d < 0 ? d + nd : d);
    if (nd == 0) continue;  // dim 0 / -1 of a scalar: nothing to reduce
    if (mask & (1u << w)) return std::nullopt;
    mask |= 1u << w;
  }
  return mask;
}

namespace {

template <int32_t op>
struct SumMean {
  static at::Tensor functional(T self, at::OptionalIntArrayRef dim, bool keepdim,
                               std::optional<at::ScalarType> dtype) {
    if (op == KPDR_REDUCE_SUM) {  // counts: sums of masks and integer tensors
      at::Tensor r = runtime_integer_sum(self, dim, keepdim, dtype);
      if (r.defined()) return r;
    }
    if (reduce_eligible(self)) {
      if (auto mask = reduce_mask(self, dim.value_or(at::IntArrayRef{}))) {
        at::Tensor r = reduce_into_new(self, *mask, keepdim, dtype.value_or(self.scalar_type()), op);
        if (r.defined()) return r;
      }
    }
    return run_on_fallback<at::Tensor, T, at::OptionalIntArrayRef, bool, std::optional<at::ScalarType>>(
        kernel_key(&functional), self, dim, keepdim, dtype);
  }
};

template <int32_t op>
struct Extreme {  // amax / amin (and max() / min()): no identity, so empty reductions raise (fallback)
  static at::Tensor native(T self, at::IntArrayRef dim, bool keepdim) {
    // Bool and integer tensors: the entry compares their extremes exactly in
    // int64 (narrowed back to the input's dtype here).
    const bool integer = reduce_integer_eligible(self);
    if (!integer && !reduce_eligible(self)) return at::Tensor();
    auto mask = reduce_mask(self, dim);
    if (!mask) return at::Tensor();
    for (int64_t d = 0; d < self.dim(); ++d) {
      if ((*mask & (1u << d)) && self.size(d) == 0) return at::Tensor();
    }
    if (self.dim() == 0 && self.numel() == 0) return at::Tensor();
    at::Tensor r = reduce_into_new(self, *mask, keepdim, integer ? at::kLong : self.scalar_type(), op);
    return r.defined() && r.scalar_type() != self.scalar_type() ? r.to(self.scalar_type()) : r;
  }
  static at::Tensor functional(T self, at::IntArrayRef dim, bool keepdim) {
    at::Tensor r = native(self, dim, keepdim);
    if (r.defined()) return r;
    return run_on_fallback<at::Tensor, T, at::IntArrayRef, bool>(kernel_key(&functional), self,
                                                                 dim, keepdim);
  }
  // max() / min(): every dimension; an empty tensor raises ATen's error (fallback).
  static at::Tensor all(T self) {
    if (self.numel() > 0) {
      at::Tensor r = native(self, {}, false);
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T>(kernel_key(&all), self);
  }
};

// aminmax: the two extremes, each one reduction (ATen's multinomial checks
// its probabilities with it).
std::tuple<at::Tensor, at::Tensor> aminmax(T self, std::optional<int64_t> dim, bool keepdim) {
  const std::vector<int64_t> dims = dim.has_value() ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
  if (!dim.has_value() || self.dim() > 0) {  // (a 0-dim tensor with a dim: ATen's rules, through the fallback)
    at::Tensor low = Extreme<KPDR_REDUCE_AMIN>::native(self, dims, keepdim);
    at::Tensor high = low.defined() ? Extreme<KPDR_REDUCE_AMAX>::native(self, dims, keepdim) : low;
    if (high.defined()) return {low, high};
  }
  return run_on_fallback<std::tuple<at::Tensor, at::Tensor>, T, std::optional<int64_t>, bool>(
      kernel_key(&aminmax), self, dim, keepdim);
}

}  // namespace

void register_runtime_reduce(Registrar& r) {
  if (runtime_kernels().reduce == nullptr) return;
  r.impl("sum.dim_IntList", TORCH_FN(SumMean<KPDR_REDUCE_SUM>::functional));
  r.impl("mean.dim", TORCH_FN(SumMean<KPDR_REDUCE_MEAN>::functional));
  r.impl("amax", TORCH_FN(Extreme<KPDR_REDUCE_AMAX>::functional));
  r.impl("amin", TORCH_FN(Extreme<KPDR_REDUCE_AMIN>::functional));
  r.impl("max", TORCH_FN(Extreme<KPDR_REDUCE_AMAX>::all));
  r.impl("min", TORCH_FN(Extreme<KPDR_REDUCE_AMIN>::all));
  r.impl("aminmax", TORCH_FN(aminmax));
}

}  // namespace kernel_pytorch::native
