// sort (so argsort and msort), topk, kthvalue, median and nanmedian through the
// runtime's sort entry (kpdr.h: the first k of each slice along one dim, NaN
// greatest, always stable) when device memory is not host addressable. Result
// shapes and strides are computed here in C++, as ATen's meta functions would
// give them (no Python meta kernels on the hot path). What the entry cannot
// take (other dtypes, more than KPDR_MAX_DIMS dimensions, lazy negation, a bad
// dim or k, a NOT_SUPPORTED answer) runs through the counted CPU fallback,
// which raises ATen's errors. The backward of these ops is a scatter of the
// gradient (value_selecting_reduction_backward), routed in runtime_indexing.cpp.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;
using Pair = std::tuple<at::Tensor, at::Tensor>;
using OutPair = std::tuple<at::Tensor&, at::Tensor&>;

bool sortable(T self) {
  return device_tensor(self, KPDR_MAX_DIMS) && runtime_kernels().sort != nullptr;
}

// The sorted dimension, wrapped (a 0-dim tensor sorts as one element: dim 0 or -1).
std::optional<int64_t> wrapped_dim(T self, int64_t dim) {
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  if (dim < -rank || dim >= rank) return std::nullopt;
  return dim < 0 ? dim + rank : dim;
}

int64_t slice_length(T self, int64_t dim) {
  return self.dim() == 0 ? 1 : self.size(dim);
}

// self's sizes with sizes[dim] = k (1-d for a 0-dim self).
std::vector<int64_t> sizes_with(T self, int64_t dim, int64_t k) {
  std::vector<int64_t> sizes = self.dim() == 0 ? std::vector<int64_t>{1} : self.sizes().vec();
  sizes[dim] = k;
  return sizes;
}

void fill_view(T t, int64_t* strides) {
  if (t.dim() == 0) {
    strides[0] = 1;
    return;
  }
  for (int64_t d = 0; d < t.dim(); ++d) strides[d] = t.stride(d);
}

// The first k of each slice of self along dim into values and indices (either
// undefined: not written), shaped like self with k along dim (a 0-dim self and
// its outputs as one element). False, with nothing enqueued, when the entry
// cannot take the call.
bool run_sort(T self, int64_t dim, int64_t k, bool descending, T values, T indices) {
  if (!sortable(self)) return false;
  c10::DeviceGuard guard(self.device());
  kpdrSortArgs args{};
  args.ndim = static_cast<int32_t>(std::max<int64_t>(self.dim(), 1));
  args.dim = static_cast<int32_t>(dim);
  if (self.dim() == 0) args.sizes[0] = 1;
  for (int64_t d = 0; d < self.dim(); ++d) args.sizes[d] = self.size(d);
  args.k = k;
  args.dtype = *entry_dtype(self.scalar_type());
  args.in = self.const_data_ptr();
  fill_view(self, args.in_strides);
  if (values.defined()) {
    args.values = values.mutable_data_ptr();
    fill_view(values, args.values_strides);
  }
  if (indices.defined()) {
    args.indices = indices.mutable_data_ptr<int64_t>();
    fill_view(indices, args.indices_strides);
  }
  args.descending = descending ? 1 : 0;
  return launch_kernel(runtime_kernels().sort, args, current_stream(self.device().index()));
}

// sort's results: ATen's meta function gives self's strides when self is dense
// (else dense strides in self's order).
std::optional<Pair> sorted(T self, int64_t dim, bool descending) {
  const auto d = wrapped_dim(self, dim);
  if (!sortable(self) || !d) return std::nullopt;
  const std::vector<int64_t> strides = self.is_non_overlapping_and_dense()
                                           ? self.strides().vec()
                                           : at::infer_dense_strides(self.sizes(), self.strides());
  at::Tensor values = at::empty_strided(self.sizes(), strides, self.options());
  at::Tensor indices = at::empty_strided(self.sizes(), strides, self.options().dtype(at::kLong));
  if (self.numel() == 0) return Pair{values, indices};
  if (!run_sort(self, *d, slice_length(self, *d), descending, values, indices)) return std::nullopt;
  return Pair{values, indices};
}

// The first k along dim into new contiguous tensors (topk's layout).
std::optional<Pair> first_k(T self, int64_t d, int64_t k, bool descending) {
  const std::vector<int64_t> sizes = sizes_with(self, d, k);
  at::Tensor values = at::empty(sizes, self.options());
  at::Tensor indices = at::empty(sizes, self.options().dtype(at::kLong));
  bool empty = false;
  for (int64_t s : sizes) empty = empty || s == 0;
  if (!empty && !run_sort(self, d, k, descending, values, indices)) return std::nullopt;
  if (self.dim() == 0) return Pair{values.squeeze(0), indices.squeeze(0)};  // 0-dim (view({}) would be view(dtype))
  return Pair{values, indices};
}

// out= forms: the result made here, then resized into the outputs and copied
// there on the device (ATen's out= semantics; dtypes must match).
bool outs_ok(T self, T values, T indices) {
  return values.device() == self.device() && indices.device() == self.device() &&
         values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong &&
         values.layout() == at::kStrided && indices.layout() == at::kStrided;
}

void into(const Pair& result, at::Tensor& values, at::Tensor& indices) {
  at::native::resize_output(values, std::get<0>(result).sizes());
  at::native::resize_output(indices, std::get<1>(result).sizes());
  values.copy_(std::get<0>(result));
  indices.copy_(std::get<1>(result));
}

Pair sort_stable(T self, std::optional<bool> stable, int64_t dim, bool descending) {
  if (auto r = sorted(self, dim, descending)) return *r;
  return run_on_fallback<Pair, T, std::optional<bool>, int64_t, bool>(
      kernel_key(&sort_stable), self, stable, dim, descending);
}

OutPair sort_values_stable(T self, std::optional<bool> stable, int64_t dim, bool descending, at::Tensor& values,
                           at::Tensor& indices) {
  if (outs_ok(self, values, indices)) {
    if (auto r = sorted(self, dim, descending)) {
      into(*r, values, indices);
      return {values, indices};
    }
  }
  return run_on_fallback<OutPair, T, std::optional<bool>, int64_t, bool, at::Tensor&, at::Tensor&>(
      kernel_key(&sort_values_stable), self, stable, dim, descending, values, indices);
}

// sorted == false allows any order: the entry's sorted one is one of them.
std::optional<Pair> topk_native(T self, int64_t k, int64_t dim, bool largest) {
  const auto d = wrapped_dim(self, dim);
  if (!sortable(self) || !d || k < 0 || k > slice_length(self, *d) || self.scalar_type() == at::kBool ||
      (self.dim() == 0 && k == 0)) {
    return std::nullopt;  // ATen's CPU topk refuses bool: the fallback raises its error
  }
  return first_k(self, *d, k, largest);
}

Pair topk(T self, int64_t k, int64_t dim, bool largest, bool sorted_) {
  if (auto r = topk_native(self, k, dim, largest)) return *r;
  return run_on_fallback<Pair, T, int64_t, int64_t, bool, bool>(kernel_key(&topk), self, k, dim, largest, sorted_);
}

OutPair topk_values(T self, int64_t k, int64_t dim, bool largest, bool sorted_, at::Tensor& values,
                    at::Tensor& indices) {
  if (outs_ok(self, values, indices)) {
    if (auto r = topk_native(self, k, dim, largest)) {
      into(*r, values, indices);
      return {values, indices};
    }
  }
  return run_on_fallback<OutPair, T, int64_t, int64_t, bool, bool, at::Tensor&, at::Tensor&>(
      kernel_key(&topk_values), self, k, dim, largest, sorted_, values, indices);
}

// The element at position `pos` (0-based) of each ascending slice, keepdim or not.
std::optional<Pair> select_position(T self, int64_t d, int64_t pos, bool keepdim) {
  auto r = first_k(self, d, pos + 1, false);
  if (!r) return std::nullopt;
  if (self.dim() == 0) return r;
  at::Tensor values = std::get<0>(*r).narrow(d, pos, 1), indices = std::get<1>(*r).narrow(d, pos, 1);
  if (!keepdim) {
    values = values.squeeze(d);
    indices = indices.squeeze(d);
  }
  return Pair{values, indices};
}

OutPair kthvalue_values(T self, int64_t k, int64_t dim, bool keepdim, at::Tensor& values, at::Tensor& indices) {
  const auto d = wrapped_dim(self, dim);
  if (sortable(self) && d && outs_ok(self, values, indices) && k >= 1 && k <= slice_length(self, *d) &&
      self.scalar_type() != at::kBool) {  // bool: ATen's error, through the fallback
    if (auto r = select_position(self, *d, k - 1, keepdim)) {
      into(*r, values, indices);
      return {values, indices};
    }
  }
  return run_on_fallback<OutPair, T, int64_t, int64_t, bool, at::Tensor&, at::Tensor&>(
      kernel_key(&kthvalue_values), self, k, dim, keepdim, values, indices);
}

// median / nanmedian of each slice (ATen's rules): the lower median,
// position (n - 1) / 2 of the ascending order. median: a slice with a NaN
// gives its first NaN, which the stable order puts at n - nans. nanmedian: the
// lower median of the m = n - nans numbers, position (m - 1) / 2 (0 when m is 0).
// The positions come from pointwise and reduce calls and the element from a
// gather, all on the device.
std::optional<Pair> median_native(T self, int64_t dim, bool keepdim, bool ignore_nan) {
  const auto d = wrapped_dim(self, dim);
  if (!sortable(self) || !d || self.numel() == 0 || self.scalar_type() == at::kBool) return std::nullopt;
  const int64_t n = slice_length(self, *d);
  if (!entry_float(self.scalar_type())) return select_position(self, *d, (n - 1) / 2, keepdim);
  auto r = first_k(self, *d, n, false);
  if (!r) return std::nullopt;
  if (self.dim() == 0) return r;
  const at::Tensor& values = std::get<0>(*r);
  const at::Tensor nans = values.ne(values).sum(*d, /*keepdim=*/true);  // int64; isnan has no route
  at::Tensor pos;
  if (ignore_nan) {
    // (m - 1) / 2 in float32 (exact below 2^24 elements), truncated toward zero as C++ divides.
    pos = (nans.neg().add(n - 1)).to(at::kFloat).mul(0.5).to(at::kLong);
  } else {
    pos = at::where(nans.gt(0), nans.neg().add(n), at::scalar_tensor((n - 1) / 2, nans.options()));
  }
  at::Tensor v = values.gather(*d, pos), i = std::get<1>(*r).gather(*d, pos);
  if (!keepdim) {
    v = v.squeeze(*d);
    i = i.squeeze(*d);
  }
  return Pair{v, i};
}

template <bool ignore_nan>
struct Median {
  static OutPair dim_values(T self, int64_t dim, bool keepdim, at::Tensor& values, at::Tensor& indices) {
    if (outs_ok(self, values, indices) && self.numel() > 0 && self.numel() < (int64_t{1} << 24)) {
      if (auto r = median_native(self, dim, keepdim, ignore_nan)) {
        into(*r, values, indices);
        return {values, indices};
      }
    }
    return run_on_fallback<OutPair, T, int64_t, bool, at::Tensor&, at::Tensor&>(
        kernel_key(&dim_values), self, dim, keepdim, values, indices);
  }
  static at::Tensor all(T self) {
    if (sortable(self) && self.numel() > 0 && self.numel() < (int64_t{1} << 24)) {
      if (auto r = median_native(self.reshape({-1}), 0, false, ignore_nan)) return std::get<0>(*r);
    }
    return run_on_fallback<at::Tensor, T>(kernel_key(&all), self);
  }
};

}  // namespace

void register_runtime_sort(Registrar& r) {
  if (runtime_kernels().sort == nullptr) return;
  r.impl("sort.stable", TORCH_FN(sort_stable));
  r.impl("sort.values_stable", TORCH_FN(sort_values_stable));
  r.impl("topk", TORCH_FN(topk));
  r.impl("topk.values", TORCH_FN(topk_values));
  r.impl("kthvalue.values", TORCH_FN(kthvalue_values));
  if (runtime_kernels().pointwise != nullptr && runtime_kernels().reduce != nullptr &&
      runtime_kernels().gather != nullptr) {
    r.impl("median.dim_values", TORCH_FN(Median<false>::dim_values));
    r.impl("nanmedian.dim_values", TORCH_FN(Median<true>::dim_values));
    r.impl("median", TORCH_FN(Median<false>::all));
    r.impl("nanmedian", TORCH_FN(Median<true>::all));
  }
}

}  // namespace kernel_pytorch::native
