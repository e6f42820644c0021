// argmax/argmin, max.dim/min.dim, any/all, linalg_vector_norm (ord 1, 2,
// +-inf), var/std (and var_mean/std_mean) with a correction, and the
// out= forms of sum/mean/amax/amin through the runtime's reduce entry
// (kpdr.h: KPDR_REDUCE_ARGMAX .. STD) when device memory is not host
// addressable. Results are allocated contiguous in their final shape, as
// runtime_reduce.cpp does. What the entry cannot take (integer inputs, empty
// arg-reductions, bad dims, more than KPDR_MAX_DIMS dimensions, a
// NOT_SUPPORTED answer) runs through the counted CPU fallback, which also
// raises ATen's errors.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;

template <int32_t op>
struct Arg {
  static at::Tensor functional(T self, std::optional<int64_t> dim, bool keepdim) {
    if (reduce_eligible(self)) {
      std::optional<uint32_t> mask;
      if (dim.has_value()) mask = reduce_mask(self, {*dim});
      else if (self.numel() > 0) mask = reduce_mask(self, {});  // every dim: the flattened index
      bool empty = false;
      for (int64_t d = 0; mask && d < self.dim(); ++d) empty = empty || ((*mask & (1u << d)) && self.size(d) == 0);
      if (mask && !empty) {
        at::Tensor r = reduce_into_new(self, *mask, keepdim, at::kLong, op);
        if (r.defined()) return r;
      }
    }
    return run_on_fallback<at::Tensor, T, std::optional<int64_t>, bool>(kernel_key(&functional),
                                                                        self, dim, keepdim);
  }
};

// max.dim / min.dim: the values (AMAX/AMIN) and the first index of them
// (ARGMAX/ARGMIN: NaN counts as the extreme, as ATen's).
template <int32_t value_op, int32_t index_op>
struct ExtremeWithIndex {
  static std::tuple<at::Tensor, at::Tensor> functional(T self, int64_t dim, bool keepdim) {
    if (reduce_eligible(self) && self.dim() > 0) {
      auto mask = reduce_mask(self, {dim});
      if (mask && self.size(at::maybe_wrap_dim(dim, self.dim())) > 0) {
        at::Tensor values = reduce_into_new(self, *mask, keepdim, self.scalar_type(), value_op);
        at::Tensor indices = values.defined() ? reduce_into_new(self, *mask, keepdim, at::kLong, index_op) : values;
        if (indices.defined()) return {values, indices};
      }
    }
    return run_on_fallback<std::tuple<at::Tensor, at::Tensor>, T, int64_t, bool>(
        kernel_key(&functional), self, dim, keepdim);
  }
};

// any / all: (self != 0) reduced with AMAX / AMIN into float32, then != 0.
// Empty reductions (any: false, all: true) have no AMAX identity: fallback.
template <bool is_any>
struct AnyAll {
  static std::optional<at::Tensor> native(T self, at::IntArrayRef dims, bool keepdim) {
    if (!self.defined() || self.device().type() != c10::DeviceType::PrivateUse1 || self.layout() != at::kStrided ||
        self.dim() > KPDR_MAX_DIMS || !entry_dtype(self.scalar_type()) || self.numel() == 0) {
      return std::nullopt;
    }
    auto mask = reduce_mask(self, dims);
    if (!mask) return std::nullopt;
    const at::Tensor truth = self.scalar_type() == at::kBool ? self : self.ne(0);
    at::Tensor r = reduce_into_new(truth, *mask, keepdim, at::kFloat, is_any ? KPDR_REDUCE_AMAX : KPDR_REDUCE_AMIN);
    if (!r.defined()) return std::nullopt;
    return r.ne(0);
  }
  static at::Tensor full(T self) {
    if (auto r = native(self, {}, false)) return *r;
    return run_on_fallback<at::Tensor, T>(kernel_key(&full), self);
  }
  static at::Tensor dim(T self, int64_t d, bool keepdim) {
    if (self.dim() > 0) {
      if (auto r = native(self, {d}, keepdim)) return *r;
    }
    return run_on_fallback<at::Tensor, T, int64_t, bool>(kernel_key(&dim), self, d, keepdim);
  }
};

using OptDims = at::OptionalIntArrayRef;
using OptScalar = const std::optional<at::Scalar>&;

// linalg_vector_norm for ord 1, 2, inf, -inf over float inputs, composed from
// pointwise and reduce calls in float32 (ATen accumulates 16-bit inputs in
// float32 too), the result cast to the requested dtype.
at::Tensor vector_norm(T self, const at::Scalar& ord, OptDims dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  const at::ScalarType out_type = dtype.value_or(self.scalar_type());
  if (reduce_eligible(self) && entry_float(out_type) && !ord.isComplex() && self.numel() > 0) {
    const double p = ord.toDouble();
    const auto dims = dim.value_or(at::IntArrayRef{});
    const at::Tensor x = self.scalar_type() == at::kFloat ? self : self.to(at::kFloat);
    if (auto mask = reduce_mask(x, dims)) {
      at::Tensor r;
      if (p == 2.0) {
        r = reduce_into_new(x * x, *mask, keepdim, at::kFloat, KPDR_REDUCE_SUM);
        if (r.defined()) r = r.sqrt();
      } else if (p == 1.0) {
        r = reduce_into_new(x.abs(), *mask, keepdim, at::kFloat, KPDR_REDUCE_SUM);
      } else if (std::isinf(p)) {
        r = reduce_into_new(x.abs(), *mask, keepdim, at::kFloat, p > 0 ? KPDR_REDUCE_AMAX : KPDR_REDUCE_AMIN);
      }
      if (r.defined()) return out_type == at::kFloat ? r : r.to(out_type);
    }
  }
  return run_on_fallback<at::Tensor, T, const at::Scalar&, OptDims, bool, std::optional<at::ScalarType>>(
      kernel_key(&vector_norm), self, ord, dim, keepdim, dtype);
}

// The correction as a double, or nullopt (complex or otherwise unusable: fallback).
std::optional<double> correction_of(OptScalar correction) {
  if (!correction.has_value()) return 1.0;
  if (correction->isComplex()) return std::nullopt;
  return correction->toDouble();
}

template <int32_t op>
struct Moment {
  static at::Tensor functional(T self, OptDims dim, OptScalar correction, bool keepdim) {
    if (reduce_eligible(self)) {
      auto mask = reduce_mask(self, dim.value_or(at::IntArrayRef{}));
      auto c = correction_of(correction);
      if (mask && c) {
        at::Tensor r = reduce_into_new(self, *mask, keepdim, self.scalar_type(), op, *c);
        if (r.defined()) return r;
      }
    }
    return run_on_fallback<at::Tensor, T, OptDims, OptScalar, bool>(kernel_key(&functional), self,
                                                                    dim, correction, keepdim);
  }
  static std::tuple<at::Tensor, at::Tensor> with_mean(T self, OptDims dim, OptScalar correction, bool keepdim) {
    if (reduce_eligible(self)) {
      auto mask = reduce_mask(self, dim.value_or(at::IntArrayRef{}));
      auto c = correction_of(correction);
      if (mask && c) {
        at::Tensor v = reduce_into_new(self, *mask, keepdim, self.scalar_type(), op, *c);
        at::Tensor m = v.defined() ? reduce_into_new(self, *mask, keepdim, self.scalar_type(), KPDR_REDUCE_MEAN) : v;
        if (m.defined()) return {v, m};
      }
    }
    return run_on_fallback<std::tuple<at::Tensor, at::Tensor>, T, OptDims, OptScalar, bool>(
        kernel_key(&with_mean), self, dim, correction, keepdim);
  }
};

// The out= forms: the functional result through the entry, then resized into
// `out` and copied there on the device (ATen's out= semantics: out's dtype
// is the result's when none is given, and it must match for amax/amin).
bool into(const at::Tensor& result, const at::Tensor& out) {
  if (!result.defined()) return false;
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return true;
}

bool out_ok(T self, T out) {
  return reduce_eligible(self) && out.device() == self.device() && out.layout() == at::kStrided &&
         entry_float(out.scalar_type());
}

at::Tensor& sum_out(T self, OptDims dim, bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (out_ok(self, out) && (!dtype || *dtype == out.scalar_type())) {
    if (auto mask = reduce_mask(self, dim.value_or(at::IntArrayRef{}))) {
      if (into(reduce_into_new(self, *mask, keepdim, out.scalar_type(), KPDR_REDUCE_SUM), out)) return out;
    }
  }
  return run_on_fallback<at::Tensor&, T, OptDims, bool, std::optional<at::ScalarType>, at::Tensor&>(
      kernel_key(&sum_out), self, dim, keepdim, dtype, out);
}

at::Tensor& mean_out(T self, OptDims dim, bool keepdim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (out_ok(self, out) && (!dtype || *dtype == out.scalar_type())) {
    if (auto mask = reduce_mask(self, dim.value_or(at::IntArrayRef{}))) {
      if (into(reduce_into_new(self, *mask, keepdim, out.scalar_type(), KPDR_REDUCE_MEAN), out)) return out;
    }
  }
  return run_on_fallback<at::Tensor&, T, OptDims, bool, std::optional<at::ScalarType>, at::Tensor&>(
      kernel_key(&mean_out), self, dim, keepdim, dtype, out);
}

// argmax.out / argmin.out (ATen's multinomial writes its draw this way).
template <int32_t op>
struct ArgOut {
  static at::Tensor& out_form(T self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
    if (reduce_eligible(self) && out.device() == self.device() && out.scalar_type() == at::kLong) {
      std::optional<uint32_t> mask;
      if (dim.has_value()) mask = reduce_mask(self, {*dim});
      else if (self.numel() > 0) mask = reduce_mask(self, {});
      bool empty = false;
      for (int64_t d = 0; mask && d < self.dim(); ++d) empty = empty || ((*mask & (1u << d)) && self.size(d) == 0);
      if (mask && !empty && into(reduce_into_new(self, *mask, keepdim, at::kLong, op), out)) return out;
    }
    return run_on_fallback<at::Tensor&, T, std::optional<int64_t>, bool, at::Tensor&>(
        kernel_key(&out_form), self, dim, keepdim, out);
  }
};

template <int32_t op>
struct ExtremeOut {
  static at::Tensor& out_form(T self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
    if (out_ok(self, out) && out.scalar_type() == self.scalar_type()) {
      auto mask = reduce_mask(self, dim);
      bool empty = false;
      for (int64_t d = 0; mask && d < self.dim(); ++d) empty = empty || ((*mask & (1u << d)) && self.size(d) == 0);
      if (mask && !empty && into(reduce_into_new(self, *mask, keepdim, self.scalar_type(), op), out)) return out;
    }
    return run_on_fallback<at::Tensor&, T, at::IntArrayRef, bool, at::Tensor&>(
        kernel_key(&out_form), self, dim, keepdim, out);
  }
};

}  // namespace

at::Tensor runtime_integer_sum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                               std::optional<at::ScalarType> dtype) {
  if (!reduce_integer_eligible(self) || dtype.value_or(at::kLong) != at::kLong) return at::Tensor();
  auto mask = reduce_mask(self, dim.value_or(at::IntArrayRef{}));
  return mask ? reduce_into_new(self, *mask, keepdim, at::kLong, KPDR_REDUCE_SUM) : at::Tensor();
}

void register_runtime_statistics(Registrar& r) {
  if (runtime_kernels().reduce == nullptr) return;
  r.impl("argmax", TORCH_FN(Arg<KPDR_REDUCE_ARGMAX>::functional));
  r.impl("argmin", TORCH_FN(Arg<KPDR_REDUCE_ARGMIN>::functional));
  r.impl("argmax.out", TORCH_FN(ArgOut<KPDR_REDUCE_ARGMAX>::out_form));
  r.impl("argmin.out", TORCH_FN(ArgOut<KPDR_REDUCE_ARGMIN>::out_form));
  r.impl("max.dim", TORCH_FN((ExtremeWithIndex<KPDR_REDUCE_AMAX, KPDR_REDUCE_ARGMAX>::functional)));
  r.impl("min.dim", TORCH_FN((ExtremeWithIndex<KPDR_REDUCE_AMIN, KPDR_REDUCE_ARGMIN>::functional)));
  r.impl("linalg_vector_norm", TORCH_FN(vector_norm));
  if (runtime_kernels().pointwise != nullptr) {
    r.impl("any", TORCH_FN(AnyAll<true>::full));
    r.impl("any.dim", TORCH_FN(AnyAll<true>::dim));
    r.impl("all", TORCH_FN(AnyAll<false>::full));
    r.impl("all.dim", TORCH_FN(AnyAll<false>::dim));
  }
  r.impl("var.correction", TORCH_FN(Moment<KPDR_REDUCE_VAR>::functional));
  r.impl("std.correction", TORCH_FN(Moment<KPDR_REDUCE_STD>::functional));
  r.impl("var_mean.correction", TORCH_FN(Moment<KPDR_REDUCE_VAR>::with_mean));
  r.impl("std_mean.correction", TORCH_FN(Moment<KPDR_REDUCE_STD>::with_mean));
  r.impl("sum.IntList_out", TORCH_FN(sum_out));
  r.impl("mean.out", TORCH_FN(mean_out));
  r.impl("amax.out", TORCH_FN(ExtremeOut<KPDR_REDUCE_AMAX>::out_form));
  r.impl("amin.out", TORCH_FN(ExtremeOut<KPDR_REDUCE_AMIN>::out_form));
}

}  // namespace kernel_pytorch::native
