// logical_not, bitwise_not, nan_to_num, tril/triu, arange, linspace (and isin,
// composed of eq and any) through the runtime's pointwise entry (kpdr.h: LOGICAL_NOT, BITWISE_NOT, NAN_TO_NUM
// and the index-dependent TRIL, TRIU, ARANGE, LINSPACE codes) when device memory is not host
// addressable. Integer and bool tensors compute in the entry's integer
// arithmetic. What the entry cannot take falls back to the CPU (counted),
// which also raises ATen's errors.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/Dispatch.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <array>
#include <algorithm>
#include <limits>
#include <optional>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;

// A Python-number operand of the iterator (a 0-dim CPU tensor of `type`).
at::Tensor number(const at::Scalar& value, at::ScalarType type) {
  at::Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(type));
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// ---- logical_not / bitwise_not ----------------------------------------------

at::Tensor& logical_not_out(T self, at::Tensor& out) {
  if (device_tensor(self) && device_tensor(out) && self.device() == out.device()) {
    at::TensorIterator iter =
        at::TensorIteratorConfig().check_all_same_dtype(false).add_output(out).add_const_input(self).build();
    if (runtime_pointwise(iter, KPDR_POINTWISE_LOGICAL_NOT, 1.0)) return out;
  }
  return run_on_fallback<at::Tensor&, T, at::Tensor&>(kernel_key(&logical_not_out), self, out);
}

// bool: logical not; integers: ~x (float tensors: ATen's error, from the fallback).
bool bitwise_not_into(const at::TensorBase& out, T self, at::Tensor* result) {
  if (!device_tensor(self) || entry_float(self.scalar_type())) return false;
  at::TensorIterator iter = at::TensorIterator::unary_op(const_cast<at::TensorBase&>(out), self);
  if (!runtime_pointwise(iter, self.scalar_type() == at::kBool ? KPDR_POINTWISE_LOGICAL_NOT
                                                                 : KPDR_POINTWISE_BITWISE_NOT, 1.0)) {
    return false;
  }
  *result = iter.output();
  return true;
}

at::Tensor bitwise_not(T self) {
  at::Tensor r;
  if (bitwise_not_into(at::TensorBase(), self, &r)) return r;
  return run_on_fallback<at::Tensor, T>(kernel_key(&bitwise_not), self);
}

at::Tensor& bitwise_not_(at::Tensor& self) {
  at::Tensor r;
  if (bitwise_not_into(self, self, &r)) return self;
  return run_on_fallback<at::Tensor&, at::Tensor&>(kernel_key(&bitwise_not_), self);
}

at::Tensor& bitwise_not_out(T self, at::Tensor& out) {
  at::Tensor r;
  if (device_tensor(out) && bitwise_not_into(out, self, &r)) return out;
  return run_on_fallback<at::Tensor&, T, at::Tensor&>(kernel_key(&bitwise_not_out), self, out);
}

// ---- same-shape ops: out = op(self, x1, x2), dimension by dimension --------

// Not a TensorIterator: tril/triu need the two matrix dimensions as they are
// (an iterator would merge or reorder them), and nan_to_num's two scalar
// operands exceed an iterator's one CPU scalar.
bool same_shape(int32_t op, T self, at::Tensor& out, double alpha, double x1 = 0.0, double x2 = 0.0) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.pointwise == nullptr || !device_tensor(self) || !device_tensor(out) || self.device() != out.device() ||
      self.dim() > KPDR_MAX_DIMS || out.sizes() != self.sizes() || out.scalar_type() != self.scalar_type() ||
      (!out.is_same(self) && out.is_alias_of(self))) {
    return false;
  }
  kpdrPointwiseArgs args{};
  args.op = op;
  args.ndim = static_cast<int32_t>(self.dim());
  args.alpha = alpha;
  args.out_dtype = *entry_dtype(out.scalar_type());
  args.in[0].dtype = *entry_dtype(self.scalar_type());
  args.in[1].dtype = args.in[2].dtype = KPDR_DTYPE_FLOAT32;
  args.in[1].value = x1;
  args.in[2].value = x2;
  for (int64_t d = 0; d < self.dim(); ++d) {
    args.sizes[d] = self.size(d);
    args.out_strides[d] = out.stride(d);
    args.in[0].strides[d] = self.stride(d);
  }
  c10::DeviceGuard guard(self.device());
  if (self.numel() == 0) return true;
  args.in[0].data = self.const_data_ptr();
  args.out = out.mutable_data_ptr();
  return launch_kernel(kernels.pointwise, args, current_stream(self.device().index()));
}

at::Tensor& nan_to_num_out(T self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out) {
  if (device_tensor(self) && device_tensor(out) && entry_float(self.scalar_type()) &&
      out.scalar_type() == self.scalar_type() && (out.is_same(self) || !out.is_alias_of(self))) {
    // ATen's defaults: the dtype's largest and lowest finite values.
    double high = static_cast<double>(std::numeric_limits<float>::max());
    if (self.scalar_type() == at::kHalf) high = 65504.0;
    if (self.scalar_type() == at::kBFloat16) high = static_cast<float>(std::numeric_limits<c10::BFloat16>::max());
    at::native::resize_output(out, self.sizes());
    if (same_shape(KPDR_POINTWISE_NAN_TO_NUM, self, out, nan.value_or(0.0), posinf.value_or(high),
                   neginf.value_or(-high))) {
      return out;
    }
  }
  return run_on_fallback<at::Tensor&, T, std::optional<double>, std::optional<double>, std::optional<double>,
                         at::Tensor&>(kernel_key(&nan_to_num_out), self, nan, posinf, neginf, out);
}

// ---- tril / triu --------------------------------------------------------------

bool triangle(int32_t op, T self, int64_t diagonal, at::Tensor& out) {
  return self.dim() >= 2 && same_shape(op, self, out, static_cast<double>(diagonal));
}

template <int32_t op>
struct Triangle {
  static at::Tensor functional(T self, int64_t diagonal) {
    if (device_tensor(self) && self.dim() >= 2) {
      at::Tensor out = at::empty(self.sizes(), self.options());
      if (triangle(op, self, diagonal, out)) return out;
    }
    return run_on_fallback<at::Tensor, T, int64_t>(kernel_key(&functional), self, diagonal);
  }
  static at::Tensor& inplace(at::Tensor& self, int64_t diagonal) {
    if (triangle(op, self, diagonal, self)) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, int64_t>(kernel_key(&inplace), self, diagonal);
  }
  static at::Tensor& out(T self, int64_t diagonal, at::Tensor& result) {
    if (device_tensor(self) && device_tensor(result) && self.dim() >= 2 && !result.is_alias_of(self)) {
      at::native::resize_output(result, self.sizes());
      if (triangle(op, self, diagonal, result)) return result;
    }
    return run_on_fallback<at::Tensor&, T, int64_t, at::Tensor&>(kernel_key(&out), self, diagonal, result);
  }
};

// ---- arange -------------------------------------------------------------------

at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const at::ScalarType dtype = out.scalar_type();
  const bool real = at::isIntegralType(dtype, /*includeBool=*/false) || dtype == at::kFloat || dtype == at::kDouble ||
                    dtype == at::kHalf || dtype == at::kBFloat16;
  if (device_tensor(out) && real && !start.isComplex() && !end.isComplex() && !step.isComplex()) {
    // ATen's own checks and length for out's dtype (its meta kernel for
    // arange is Python: slow, and its first call imports torch._dynamo).
    int64_t length = -1;
    AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange_out", [&] {
      length = at::native::compute_arange_size<scalar_t>(start, end, step);
    });
    const std::array<int64_t, 1> shape{length};
    at::native::resize_output(out, shape);
    const bool integer = at::isIntegralType(out.scalar_type(), /*includeBool=*/false);
    const at::Tensor first = number(start, integer ? at::kLong : at::kDouble);
    at::TensorIterator iter = at::TensorIteratorConfig()
                                  .check_all_same_dtype(false)
                                  .allow_cpu_scalars(true)
                                  .resize_outputs(false)
                                  .add_output(out)
                                  .add_const_input(first)
                                  .build();
    const double alpha = integer ? static_cast<double>(step.to<int64_t>()) : step.to<double>();
    if (out.dim() == 1 && out.scalar_type() != at::kBool && runtime_pointwise(iter, KPDR_POINTWISE_ARANGE, alpha)) {
      return out;
    }
  }
  return run_on_fallback<at::Tensor&, const at::Scalar&, const at::Scalar&, const at::Scalar&, at::Tensor&>(
      kernel_key(&arange_out), start, end, step, out);
}

// ---- linspace -----------------------------------------------------------------

// Floating dtypes only: ATen's CPU kernel computes integer linspace through
// its own rounding, which the LINSPACE code (kpdr.h) does not promise.
at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  if (device_tensor(out) && at::isFloatingType(out.scalar_type()) && !start.isComplex() && !end.isComplex()) {
    // ATen's own checks (steps >= 0) and length, on a meta tensor.
    at::Tensor meta = at::empty({0}, out.options().device(at::kMeta));
    at::linspace_out(meta, start, end, steps);
    at::native::resize_output(out, meta.sizes());
    if (steps == 0) return out;
    if (steps == 1) {
      out.fill_(start);
      return out;
    }
    const double first = start.to<double>(), last = end.to<double>();
    // TensorIterator takes one CPU scalar: end travels as a device 0-dim
    // tensor of out's dtype (ATen's kernel also reads it as that dtype).
    const at::Tensor x0 = number(start, at::kDouble), x1 = at::scalar_tensor(end, out.options());
    at::TensorIterator iter = at::TensorIteratorConfig()
                                  .check_all_same_dtype(false)
                                  .allow_cpu_scalars(true)
                                  .resize_outputs(false)
                                  .add_output(out)
                                  .add_const_input(x0)
                                  .add_const_input(x1)
                                  .build();
    const double step = (last - first) / static_cast<double>(steps - 1);
    if (out.dim() == 1 && runtime_pointwise(iter, KPDR_POINTWISE_LINSPACE, step)) return out;
  }
  return run_on_fallback<at::Tensor&, const at::Scalar&, const at::Scalar&, int64_t, at::Tensor&>(
      kernel_key(&linspace_out), start, end, steps, out);
}

// ---- isin ---------------------------------------------------------------------

// elements[i] in test_elements as one broadcast comparison and an any() over
// the test elements: both ops run on the device, so the data stays there
// (Hugging Face's generate() checks for end-of-sequence tokens this way every
// step). Quadratic, so only for comparison grids up to kIsinGrid elements;
// larger calls (and CPU operands) go to the fallback, whose sort-based
// kernel scales.
constexpr int64_t kIsinGrid = int64_t{1} << 24;

// Integer and floating dtypes: ATen rejects bool and complex (the fallback raises its error).
bool isin_dtype(T t) {
  return at::isIntegralType(t.scalar_type(), /*includeBool=*/false) || at::isFloatingType(t.scalar_type());
}

std::optional<at::Tensor> isin_native(T elements, T test_elements, bool invert) {
  if (!device_tensor(elements) || !device_tensor(test_elements) || !isin_dtype(elements) ||
      !isin_dtype(test_elements) || elements.device() != test_elements.device() ||
      elements.numel() * std::max<int64_t>(test_elements.numel(), 1) > kIsinGrid) {
    return std::nullopt;
  }
  if (elements.numel() == 0 || test_elements.numel() == 0) {
    return at::full(elements.sizes(), invert, elements.options().dtype(at::kBool));
  }
  const at::Tensor hits = at::eq(elements.reshape({-1, 1}), test_elements.reshape({1, -1})).any(1);
  const at::Tensor result = hits.reshape(elements.sizes());
  return invert ? at::logical_not(result) : result;
}

at::Tensor isin_tensor_tensor(T elements, T test_elements, bool assume_unique, bool invert) {
  if (auto r = isin_native(elements, test_elements, invert)) return *r;
  return run_on_fallback<at::Tensor, T, T, bool, bool>(
      kernel_key(&isin_tensor_tensor), elements, test_elements, assume_unique, invert);
}

at::Tensor isin_tensor_scalar(T elements, const at::Scalar& test_element, bool assume_unique, bool invert) {
  if (device_tensor(elements) && isin_dtype(elements) && !test_element.isComplex() && !test_element.isBoolean()) {
    const at::Tensor hits = at::eq(elements, test_element);
    return invert ? at::logical_not(hits) : hits;
  }
  return run_on_fallback<at::Tensor, T, const at::Scalar&, bool, bool>(
      kernel_key(&isin_tensor_scalar), elements, test_element, assume_unique, invert);
}

// ---- _assert_async --------------------------------------------------------------

// torch._assert_async (ATen's multinomial checks its probabilities with it):
// reads the one value back, as the CPU does, and raises the message when it
// is zero. (CUDA raises from the device later; a host check is exact.)
void assert_async_msg(T self, c10::string_view message) {
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  TORCH_CHECK(self.item<bool>(), message);
}

void assert_async(T self) {
  assert_async_msg(self, "Expected Tensor with single nonzero value, but got zero");
}

}  // namespace

void register_runtime_tensor_ops(Registrar& r) {
  if (runtime_kernels().pointwise == nullptr) return;
  r.impl("logical_not.out", TORCH_FN(logical_not_out));
  r.impl("bitwise_not", TORCH_FN(bitwise_not));
  r.impl("bitwise_not_", TORCH_FN(bitwise_not_));
  r.impl("bitwise_not.out", TORCH_FN(bitwise_not_out));
  r.impl("nan_to_num.out", TORCH_FN(nan_to_num_out));
  r.impl("tril", TORCH_FN(Triangle<KPDR_POINTWISE_TRIL>::functional));
  r.impl("tril_", TORCH_FN(Triangle<KPDR_POINTWISE_TRIL>::inplace));
  r.impl("tril.out", TORCH_FN(Triangle<KPDR_POINTWISE_TRIL>::out));
  r.impl("triu", TORCH_FN(Triangle<KPDR_POINTWISE_TRIU>::functional));
  r.impl("triu_", TORCH_FN(Triangle<KPDR_POINTWISE_TRIU>::inplace));
  r.impl("triu.out", TORCH_FN(Triangle<KPDR_POINTWISE_TRIU>::out));
  r.impl("arange.start_out", TORCH_FN(arange_out));
  r.impl("linspace.out", TORCH_FN(linspace_out));
  r.impl("_assert_async", TORCH_FN(assert_async));
  r.impl("_assert_async.msg", TORCH_FN(assert_async_msg));
  if (runtime_kernels().reduce != nullptr) {  // any() through the integer sum
    r.impl("isin.Tensor_Tensor", TORCH_FN(isin_tensor_tensor));
    r.impl("isin.Tensor_Scalar", TORCH_FN(isin_tensor_scalar));
  }
}

}  // namespace kernel_pytorch::native
