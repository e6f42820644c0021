// Elementwise ops (arithmetic, activations and their backward, comparisons,
// where, fill, the optimizers' addcmul/addcdiv/lerp) through the runtime's
// generic pointwise entry (kpdrKernelTable::pointwise) when device memory is
// not host addressable.
//
// ATen's own TensorIterator computes what the CPU and CUDA kernels would:
// broadcast shape, type promotion, the output's allocation and layout, the
// overlap checks, and collapsed dimensions; the entry then gets one strided
// view per operand. 0-dim CPU tensors (Python scalars) travel as values.
// Calls the entry cannot take (other dtypes, more than KPDR_MAX_DIMS
// dimensions, tensors of other devices, a NOT_SUPPORTED answer) run through
// the counted CPU fallback exactly as before, which also applies the device
// rule (device_check.h) and raises ATen's errors.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <c10/core/DeviceGuard.h>

#include <initializer_list>
#include <optional>
#include <tuple>
#include <vector>
#include <limits>
#include <string_view>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {

std::optional<kpdrDtype> entry_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return KPDR_DTYPE_FLOAT32;
    case at::kHalf: return KPDR_DTYPE_FLOAT16;
    case at::kBFloat16: return KPDR_DTYPE_BFLOAT16;
    case at::kBool: return KPDR_DTYPE_BOOL;
    case at::kLong: return KPDR_DTYPE_INT64;
    case at::kInt: return KPDR_DTYPE_INT32;
    default: return std::nullopt;
  }
}

bool entry_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16;
}

bool entry_integer(at::ScalarType t) {
  return t == at::kBool || t == at::kInt || t == at::kLong;
}

bool device_tensor(const at::Tensor& t, int64_t max_dims) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && t.layout() == at::kStrided &&
         !t.is_neg() && !t.is_conj() && entry_dtype(t.scalar_type()).has_value() && t.dim() <= max_dims;
}

// A Python scalar as the CPU compares it: rounded to the comparison's dtype
// first (CPU TensorIterator casts the wrapped scalar to the common dtype).
double rounded_to(at::ScalarType type, double v) {
  switch (type) {
    case at::kFloat: return static_cast<float>(v);
    case at::kHalf: return static_cast<float>(c10::Half(static_cast<float>(v)));
    case at::kBFloat16: return static_cast<float>(c10::BFloat16(static_cast<float>(v)));
    default: return v;
  }
}

bool runtime_pointwise(at::TensorIteratorBase& iter, int32_t op, double alpha) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.pointwise == nullptr || iter.ndim() > KPDR_MAX_DIMS || iter.noutputs() != 1 ||
      iter.ninputs() > 3) {
    return false;
  }
  const c10::Device device = iter.device(0);
  if (device.type() != c10::DeviceType::PrivateUse1) return false;
  kpdrPointwiseArgs args{};
  args.op = op;
  args.alpha = alpha;
  const int nd = iter.ndim();
  args.ndim = nd;
  // TensorIterator's dimension 0 is the fastest; the entry takes any order,
  // row-major reads best.
  for (int d = 0; d < nd; ++d) args.sizes[nd - 1 - d] = iter.shape()[d];
  auto strides_of = [&](int arg, int64_t* out) {
    const auto bytes = iter.strides(arg);
    const int64_t size = iter.element_size(arg);
    for (int d = 0; d < nd; ++d) {
      if (bytes[d] % size != 0) return false;
      out[nd - 1 - d] = bytes[d] / size;
    }
    return true;
  };
  const auto out_dtype = entry_dtype(iter.dtype(0));
  if (!out_dtype || iter.is_cpu_scalar(0)) return false;
  args.out_dtype = *out_dtype;
  if (!strides_of(0, args.out_strides)) return false;
  for (int k = 0; k < iter.ninputs(); ++k) {
    const int arg = iter.noutputs() + k;
    kpdrOperand& in = args.in[k];
    if (iter.is_cpu_scalar(arg)) {
      if (at::isComplexType(iter.dtype(arg))) return false;
      in.data = nullptr;
      // An integer or bool scalar keeps integer calls in integer arithmetic (kpdr.h).
      const bool integral = at::isIntegralType(iter.dtype(arg), /*includeBool=*/true);
      in.dtype = integral ? KPDR_DTYPE_INT64 : KPDR_DTYPE_FLOAT32;
      in.value = integral ? static_cast<double>(iter.scalar_value<int64_t>(arg)) : iter.scalar_value<double>(arg);
      if (op >= KPDR_POINTWISE_EQ && op <= KPDR_POINTWISE_GE) in.value = rounded_to(iter.common_dtype(), in.value);
      continue;
    }
    const auto dtype = entry_dtype(iter.dtype(arg));
    if (!dtype || iter.device(arg) != device) return false;
    in.dtype = *dtype;
    if (!strides_of(arg, in.strides)) return false;
    in.data = iter.data_ptr(arg);
  }
  c10::DeviceGuard guard(device);
  if (iter.numel() == 0) return true;
  args.out = iter.data_ptr(0);
  return launch_kernel(kernels.pointwise, args, current_stream(device.index()));
}

bool runtime_pointwise_copy(const at::Tensor& src, const at::Tensor& dst) {
  if (!entry_dtype(src.scalar_type()) || !entry_dtype(dst.scalar_type()) || src.device() != dst.device() ||
      src.is_neg() || src.is_conj() || dst.is_neg() || dst.is_conj() || src.is_alias_of(dst)) {
    return false;  // overlapping copies keep the host round trip, which is overlap safe
  }
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .add_output(dst)
                                .add_const_input(src)
                                .resize_outputs(false)
                                .check_all_same_dtype(false)
                                .set_check_mem_overlap(false)
                                .build();
  return runtime_pointwise(iter, KPDR_POINTWISE_COPY, 1.0);
}

namespace {

using T = const at::Tensor&;
using S = const at::Scalar&;

// Whether every tensor may go to the entry: strided my_asic tensors of one
// device with an entry dtype, or (scalars_ok, for TensorIterator ops) 0-dim
// CPU tensors, read as values. Anything else takes the fallback, which
// raises the device errors ATen raises.
bool eligible(std::initializer_list<const at::Tensor*> tensors, bool scalars_ok = true) {
  std::optional<c10::Device> device;
  for (const at::Tensor* t : tensors) {
    if (t->defined() && t->device().type() == c10::DeviceType::PrivateUse1) {
      device = t->device();
      break;
    }
  }
  if (!device) return false;
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || t->layout() != at::kStrided || t->is_neg() || t->is_conj()) return false;
    if (t->device() == *device) {
      if (!entry_dtype(t->scalar_type())) return false;
    } else if (!(scalars_ok && t->device().is_cpu() && t->dim() == 0 && !at::isComplexType(t->scalar_type()))) {
      return false;
    }
  }
  return true;
}

bool real(S s) {
  return !s.isComplex();
}

// Runs iter (built by `build`) through the entry; returns its output, or an
// undefined tensor when the entry cannot take it.
template <typename Build>
at::Tensor through_entry(Build&& build, int32_t op, double alpha) {
  at::TensorIterator iter = build();
  if (!runtime_pointwise(iter, op, alpha)) return at::Tensor();
  return iter.output();
}

// ---- unary ----------------------------------------------------------------

enum class Iter { kUnary, kUnaryFloat, kBinary, kBinaryFloat, kComparison };

at::TensorIterator make(Iter kind, at::TensorBase& out, const at::TensorBase& a, const at::TensorBase& b = {}) {
  switch (kind) {
    case Iter::kUnary: return at::TensorIterator::unary_op(out, a);
    case Iter::kUnaryFloat: return at::TensorIterator::unary_float_op(out, a);
    case Iter::kBinary: return at::TensorIterator::binary_op(out, a, b);
    case Iter::kBinaryFloat: return at::TensorIterator::binary_float_op(out, a, b);
    case Iter::kComparison: return at::TensorIterator::comparison_op(out, a, b);
  }
  TORCH_INTERNAL_ASSERT(false);
}

// Ops whose integer (and bool) calls the entry computes in integer
// arithmetic (kpdr.h's [int] codes), or, for DIV, in float as ATen's true
// division does; the others take float inputs only.
constexpr bool integer_ok(int32_t op) {
  switch (op) {
    case KPDR_POINTWISE_NEG: case KPDR_POINTWISE_ABS: case KPDR_POINTWISE_SIGN: case KPDR_POINTWISE_ADD:
    case KPDR_POINTWISE_SUB: case KPDR_POINTWISE_MUL: case KPDR_POINTWISE_DIV: case KPDR_POINTWISE_MAXIMUM:
    case KPDR_POINTWISE_MINIMUM: case KPDR_POINTWISE_EQ: case KPDR_POINTWISE_NE: case KPDR_POINTWISE_LT:
    case KPDR_POINTWISE_LE: case KPDR_POINTWISE_GT: case KPDR_POINTWISE_GE: case KPDR_POINTWISE_BITWISE_AND:
    case KPDR_POINTWISE_BITWISE_OR: case KPDR_POINTWISE_BITWISE_XOR: case KPDR_POINTWISE_FLOOR:
    case KPDR_POINTWISE_CEIL: case KPDR_POINTWISE_ROUND: case KPDR_POINTWISE_TRUNC:
      return true;
  }
  return false;
}

// ATen rejects negation, abs, subtraction and rounding of bool tensors: the fallback raises its error.
bool bool_rejected(int32_t op, std::initializer_list<const at::Tensor*> tensors) {
  if (op != KPDR_POINTWISE_NEG && op != KPDR_POINTWISE_ABS && op != KPDR_POINTWISE_SUB && op != KPDR_POINTWISE_FLOOR &&
      op != KPDR_POINTWISE_CEIL && op != KPDR_POINTWISE_ROUND && op != KPDR_POINTWISE_TRUNC) {
    return false;
  }
  for (const at::Tensor* t : tensors) {
    if (t->scalar_type() == at::kBool) return true;
  }
  return false;
}

// Float inputs only: integer ops keep ATen's integer semantics on the CPU.
bool float_inputs(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->device().type() == c10::DeviceType::PrivateUse1 && !entry_float(t->scalar_type())) return false;
  }
  return true;
}

// `tag` tells apart ops that share an op code (sign, sgn): each registered
// kernel must be its own function, as its fallback finds the op by it.
template <int32_t op, Iter kind, int tag = 0>
struct Unary {
  static bool run(at::TensorBase out, T self, at::Tensor* result) {
    if (!eligible({&self}, false) || (!integer_ok(op) && !float_inputs({&self})) || bool_rejected(op, {&self})) {
      return false;
    }
    at::Tensor r = through_entry([&] { return make(kind, out, self); }, op, 1.0);
    if (!r.defined()) return false;
    *result = r;
    return true;
  }
  static at::Tensor functional(T self) {
    at::Tensor r;
    if (run(at::TensorBase(), self, &r)) return r;
    return run_on_fallback<at::Tensor, T>(kernel_key(&functional), self);
  }
  static at::Tensor& inplace(at::Tensor& self) {
    at::Tensor r;
    if (run(self, self, &r)) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&>(kernel_key(&inplace), self);
  }
  static at::Tensor& out(T self, at::Tensor& result) {
    at::Tensor r;
    if (eligible({&result}, false) && run(result, self, &r)) return result;
    return run_on_fallback<at::Tensor&, T, at::Tensor&>(kernel_key(&out), self, result);
  }
};

// pow(self, exponent) with a real scalar exponent.
struct PowScalar {
  static at::Tensor functional(T self, S exponent) {
    if (real(exponent) && eligible({&self}, false) && float_inputs({&self})) {
      at::TensorBase out;
      at::Tensor r = through_entry([&] { return make(Iter::kUnaryFloat, out, self); }, KPDR_POINTWISE_POW_SCALAR,
                                   exponent.toDouble());
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T, S>(kernel_key(&functional), self, exponent);
  }
};

// leaky_relu(self, negative_slope) and its backward(grad, self, negative_slope, self_is_result).
struct LeakyRelu {
  static bool run(at::TensorBase out, T self, S slope, at::Tensor* result) {
    if (!real(slope) || !eligible({&self}, false) || !float_inputs({&self})) return false;
    at::Tensor r = through_entry([&] { return make(Iter::kUnary, out, self); }, KPDR_POINTWISE_LEAKY_RELU,
                                 slope.toDouble());
    if (!r.defined()) return false;
    *result = r;
    return true;
  }
  static at::Tensor functional(T self, S slope) {
    at::Tensor r;
    if (run(at::TensorBase(), self, slope, &r)) return r;
    return run_on_fallback<at::Tensor, T, S>(kernel_key(&functional), self, slope);
  }
  static at::Tensor& inplace(at::Tensor& self, S slope) {
    at::Tensor r;
    if (run(self, self, slope, &r)) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, S>(kernel_key(&inplace), self, slope);
  }
  static at::Tensor backward(T grad, T self, S slope, bool self_is_result) {
    // (ATen's check: an in-place forward with a negative slope cannot be differentiated)
    if (real(slope) && !(self_is_result && slope.toDouble() < 0.0) && eligible({&grad, &self}, false) &&
        float_inputs({&grad, &self})) {
      at::TensorBase out;
      at::Tensor r = through_entry([&] { return make(Iter::kBinary, out, grad, self); },
                                   KPDR_POINTWISE_LEAKY_RELU_BACKWARD, slope.toDouble());
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T, T, S, bool>(kernel_key(&backward), grad, self, slope,
                                                      self_is_result);
  }
};

// isnan: x != x on the device (integer and bool tensors have none).
at::Tensor isnan(T self) {
  if (eligible({&self}, false)) {
    if (!entry_float(self.scalar_type())) return at::zeros(self.sizes(), self.options().dtype(at::kBool));
    return at::ne(self, self);
  }
  return run_on_fallback<at::Tensor, T>(kernel_key(&isnan), self);
}

// gelu / gelu_ with approximate = "none" or "tanh".
std::optional<bool> tanh_gelu(std::string_view approximate) {
  if (approximate == "none") return false;
  if (approximate == "tanh") return true;
  return std::nullopt;  // the fallback raises ATen's error
}

struct Gelu {
  static at::Tensor functional(T self, c10::string_view approximate) {
    const auto tanh = tanh_gelu(approximate);
    if (tanh && eligible({&self}, false) && float_inputs({&self})) {
      at::TensorBase out;
      at::Tensor r = through_entry([&] { return make(Iter::kUnary, out, self); },
                                   *tanh ? KPDR_POINTWISE_GELU_TANH : KPDR_POINTWISE_GELU, 1.0);
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T, c10::string_view>(kernel_key(&functional), self,
                                                            approximate);
  }
  static at::Tensor& inplace(at::Tensor& self, c10::string_view approximate) {
    const auto tanh = tanh_gelu(approximate);
    if (tanh && eligible({&self}, false) && float_inputs({&self})) {
      at::TensorBase out = self;
      at::Tensor r = through_entry([&] { return make(Iter::kUnary, out, self); },
                                   *tanh ? KPDR_POINTWISE_GELU_TANH : KPDR_POINTWISE_GELU, 1.0);
      if (r.defined()) return self;
    }
    return run_on_fallback<at::Tensor&, at::Tensor&, c10::string_view>(kernel_key(&inplace),
                                                                       self, approximate);
  }
  static at::Tensor backward(T grad, T self, c10::string_view approximate) {
    const auto tanh = tanh_gelu(approximate);
    if (tanh && eligible({&grad, &self}, false) && float_inputs({&grad, &self})) {
      at::TensorBase out;
      at::Tensor r = through_entry([&] { return make(Iter::kBinary, out, grad, self); },
                                   *tanh ? KPDR_POINTWISE_GELU_TANH_BACKWARD : KPDR_POINTWISE_GELU_BACKWARD, 1.0);
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T, T, c10::string_view>(kernel_key(&backward), grad,
                                                               self, approximate);
  }
};

// ---- binary ---------------------------------------------------------------

template <int32_t op, Iter kind, bool scalars_ok>
struct Binary {
  static bool run(at::TensorBase out, T a, T b, double alpha, at::Tensor* result) {
    if (!eligible({&a, &b}, scalars_ok) || (!integer_ok(op) && !float_inputs({&a, &b})) || bool_rejected(op, {&a, &b})) {
      return false;
    }
    at::Tensor r = through_entry([&] { return make(kind, out, a, b); }, op, alpha);
    if (!r.defined()) return false;
    *result = r;
    return true;
  }
  // add/sub (with alpha)
  static at::Tensor functional_alpha(T a, T b, S alpha) {
    at::Tensor r;
    if (real(alpha) && run(at::TensorBase(), a, b, alpha.toDouble(), &r)) return r;
    return run_on_fallback<at::Tensor, T, T, S>(kernel_key(&functional_alpha), a, b, alpha);
  }
  static at::Tensor& inplace_alpha(at::Tensor& a, T b, S alpha) {
    at::Tensor r;
    if (real(alpha) && run(a, a, b, alpha.toDouble(), &r)) return a;
    return run_on_fallback<at::Tensor&, at::Tensor&, T, S>(kernel_key(&inplace_alpha), a, b,
                                                           alpha);
  }
  static at::Tensor& out_alpha(T a, T b, S alpha, at::Tensor& result) {
    at::Tensor r;
    if (real(alpha) && eligible({&result}, false) && run(result, a, b, alpha.toDouble(), &r)) return result;
    return run_on_fallback<at::Tensor&, T, T, S, at::Tensor&>(kernel_key(&out_alpha), a, b,
                                                              alpha, result);
  }
  // mul/div/maximum/minimum/comparisons and the activations' backward
  static at::Tensor functional(T a, T b) {
    at::Tensor r;
    if (run(at::TensorBase(), a, b, 1.0, &r)) return r;
    return run_on_fallback<at::Tensor, T, T>(kernel_key(&functional), a, b);
  }
  static at::Tensor& inplace(at::Tensor& a, T b) {
    at::Tensor r;
    if (run(a, a, b, 1.0, &r)) return a;
    return run_on_fallback<at::Tensor&, at::Tensor&, T>(kernel_key(&inplace), a, b);
  }
  static at::Tensor& out(T a, T b, at::Tensor& result) {
    at::Tensor r;
    if (eligible({&result}, false) && run(result, a, b, 1.0, &r)) return result;
    return run_on_fallback<at::Tensor&, T, T, at::Tensor&>(kernel_key(&out), a, b, result);
  }
  // comparisons with a Scalar (eq.Scalar ...)
  static at::Tensor functional_scalar(T a, S b) {
    if (real(b)) {
      const at::Tensor wrapped = at::scalar_tensor(b, at::TensorOptions().dtype(b.type()));
      wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
      at::Tensor r;
      if (run(at::TensorBase(), a, wrapped, 1.0, &r)) return r;
    }
    return run_on_fallback<at::Tensor, T, S>(kernel_key(&functional_scalar), a, b);
  }
  // threshold_backward(grad, self, threshold)
  static at::Tensor functional_threshold(T grad, T self, S threshold) {
    at::Tensor r;
    if (real(threshold) && run(at::TensorBase(), grad, self, threshold.toDouble(), &r)) return r;
    return run_on_fallback<at::Tensor, T, T, S>(kernel_key(&functional_threshold), grad, self,
                                                threshold);
  }
  // lerp(self, end, weight): self + weight * (end - self) == (1 - w) * self + w * end
  static at::Tensor functional_weight(T a, T b, S weight) {
    at::Tensor r;
    if (real(weight) && run(at::TensorBase(), a, b, weight.toDouble(), &r)) return r;
    return run_on_fallback<at::Tensor, T, T, S>(kernel_key(&functional_weight), a, b, weight);
  }
  static at::Tensor& inplace_weight(at::Tensor& a, T b, S weight) {
    at::Tensor r;
    if (real(weight) && run(a, a, b, weight.toDouble(), &r)) return a;
    return run_on_fallback<at::Tensor&, at::Tensor&, T, S>(kernel_key(&inplace_weight), a, b,
                                                           weight);
  }
};

// ---- ternary --------------------------------------------------------------

// addcmul / addcdiv: self + value * t1 (*|/) t2, as ATen builds them.
template <int32_t op>
struct AddC {
  static bool run(at::TensorBase out, T self, T t1, T t2, S value, at::Tensor* result) {
    // As on CUDA, only tensor2 may be a 0-dim CPU tensor (the fallback raises for the others).
    if (!real(value) || !eligible({&self, &t1, &t2}) || !float_inputs({&self, &t1, &t2}) ||
        self.device().is_cpu() || t1.device().is_cpu()) {
      return false;
    }
    at::Tensor r = through_entry(
        [&] {
          return at::TensorIteratorConfig()
              .allow_cpu_scalars(true)
              .promote_inputs_to_common_dtype(true)
              .cast_common_dtype_to_outputs(true)
              .enforce_safe_casting_to_output(true)
              .add_output(out)
              .add_const_input(self)
              .add_const_input(t1)
              .add_const_input(t2)
              .build();
        },
        op, value.toDouble());
    if (!r.defined()) return false;
    *result = r;
    return true;
  }
  static at::Tensor functional(T self, T t1, T t2, S value) {
    at::Tensor r;
    if (run(at::TensorBase(), self, t1, t2, value, &r)) return r;
    return run_on_fallback<at::Tensor, T, T, T, S>(kernel_key(&functional), self, t1, t2, value);
  }
  static at::Tensor& inplace(at::Tensor& self, T t1, T t2, S value) {
    at::Tensor r;
    if (run(self, self, t1, t2, value, &r)) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, T, T, S>(kernel_key(&inplace), self, t1, t2,
                                                              value);
  }
};

// ---- ops with scalar parameters: clamp, softplus, log_sigmoid -----------------

// out = op(self, a, b) for a float self with real scalars a and b: a travels
// as a CPU 0-dim operand, b (an iterator takes one CPU scalar) as a device
// 0-dim tensor of self's dtype, as ATen's kernels read them in that dtype.
at::Tensor with_scalars(at::TensorBase out, T self, std::initializer_list<double> scalars, int32_t op, double alpha) {
  if (!eligible({&self}, false) || !float_inputs({&self})) return at::Tensor();
  const at::Tensor result = out.defined() ? at::Tensor(out) : at::empty_like(self);
  at::TensorIteratorConfig config;
  config.check_all_same_dtype(false).allow_cpu_scalars(true).resize_outputs(false).add_output(result).add_const_input(
      self);
  std::vector<at::Tensor> keep;
  bool first = true;
  for (double v : scalars) {
    at::Tensor t = first ? at::scalar_tensor(v, at::TensorOptions().dtype(at::kDouble))
                         : at::scalar_tensor(v, self.options());
    if (first) t.unsafeGetTensorImpl()->set_wrapped_number(true);
    first = false;
    keep.push_back(t);
    config.add_const_input(keep.back());
  }
  return through_entry([&] { return config.build(); }, op, alpha);
}

// clamp / clamp_min / clamp_max with real scalar bounds (an absent one: +-inf).
struct Clamp {
  static std::optional<std::pair<double, double>> bounds(const std::optional<at::Scalar>& lo,
                                                         const std::optional<at::Scalar>& hi) {
    if ((!lo && !hi) || (lo && lo->isComplex()) || (hi && hi->isComplex())) return std::nullopt;
    const double inf = std::numeric_limits<double>::infinity();
    return std::make_pair(lo ? lo->toDouble() : -inf, hi ? hi->toDouble() : inf);
  }
  static at::Tensor run(at::TensorBase out, T self, const std::optional<at::Scalar>& lo,
                        const std::optional<at::Scalar>& hi) {
    // Real numbers only (bool and complex bounds: the fallback keeps ATen's behaviour).
    if ((lo && !lo->isFloatingPoint() && !lo->isIntegral(false)) ||
        (hi && !hi->isFloatingPoint() && !hi->isIntegral(false))) {
      return at::Tensor();
    }
    const auto b = bounds(lo, hi);
    if (!b) return at::Tensor();
    return with_scalars(out, self, {b->first, b->second}, KPDR_POINTWISE_CLAMP, 1.0);
  }
  static at::Tensor functional(T self, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi) {
    at::Tensor r = run(at::TensorBase(), self, lo, hi);
    if (r.defined()) return r;
    return run_on_fallback<at::Tensor, T, const std::optional<at::Scalar>&, const std::optional<at::Scalar>&>(
        kernel_key(&functional), self, lo, hi);
  }
  static at::Tensor& inplace(at::Tensor& self, const std::optional<at::Scalar>& lo,
                             const std::optional<at::Scalar>& hi) {
    if (run(self, self, lo, hi).defined()) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, const std::optional<at::Scalar>&,
                           const std::optional<at::Scalar>&>(kernel_key(&inplace), self, lo, hi);
  }
  static at::Tensor min(T self, S lo) {
    at::Tensor r = run(at::TensorBase(), self, lo, std::nullopt);
    if (r.defined()) return r;
    return run_on_fallback<at::Tensor, T, S>(kernel_key(&min), self, lo);
  }
  static at::Tensor& min_(at::Tensor& self, S lo) {
    if (run(self, self, lo, std::nullopt).defined()) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, S>(kernel_key(&min_), self, lo);
  }
  static at::Tensor max(T self, S hi) {
    at::Tensor r = run(at::TensorBase(), self, std::nullopt, hi);
    if (r.defined()) return r;
    return run_on_fallback<at::Tensor, T, S>(kernel_key(&max), self, hi);
  }
  static at::Tensor& max_(at::Tensor& self, S hi) {
    if (run(self, self, std::nullopt, hi).defined()) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, S>(kernel_key(&max_), self, hi);
  }
};

struct Softplus {
  static at::Tensor forward(T self, S beta, S threshold) {
    if (real(beta) && real(threshold)) {
      at::Tensor r = with_scalars(at::TensorBase(), self, {threshold.toDouble()}, KPDR_POINTWISE_SOFTPLUS,
                                  beta.toDouble());
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T, S, S>(kernel_key(&forward), self, beta, threshold);
  }
  static at::Tensor backward(T grad, T self, S beta, S threshold) {
    if (real(beta) && real(threshold) && eligible({&grad, &self}, false) && float_inputs({&grad, &self})) {
      const at::Tensor t = at::scalar_tensor(threshold.toDouble(), at::TensorOptions().dtype(at::kDouble));
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      at::TensorBase out;
      at::Tensor r = through_entry(
          [&] {
            return at::TensorIteratorConfig()
                .check_all_same_dtype(false)
                .allow_cpu_scalars(true)
                .promote_inputs_to_common_dtype(true)
                .cast_common_dtype_to_outputs(true)
                .add_output(out)
                .add_const_input(grad)
                .add_const_input(self)
                .add_const_input(t)
                .build();
          },
          KPDR_POINTWISE_SOFTPLUS_BACKWARD, beta.toDouble());
      if (r.defined()) return r;
    }
    return run_on_fallback<at::Tensor, T, T, S, S>(kernel_key(&backward), grad, self, beta,
                                                   threshold);
  }
};

// log_sigmoid_forward returns (output, buffer); as on CUDA the buffer is
// empty and the backward reads the input instead.
struct LogSigmoid {
  static std::tuple<at::Tensor, at::Tensor> forward(T self) {
    if (eligible({&self}, false) && float_inputs({&self})) {
      at::TensorBase out;
      at::Tensor r = through_entry([&] { return make(Iter::kUnary, out, self); }, KPDR_POINTWISE_LOG_SIGMOID, 1.0);
      if (r.defined()) return {r, at::empty({0}, self.options())};
    }
    return run_on_fallback<std::tuple<at::Tensor, at::Tensor>, T>(kernel_key(&forward), self);
  }
  static at::Tensor backward(T grad, T self, T buffer) {
    if (eligible({&grad, &self}, false) && float_inputs({&grad, &self})) {
      at::TensorBase out;
      at::Tensor r = through_entry([&] { return make(Iter::kBinary, out, grad, self); },
                                   KPDR_POINTWISE_LOG_SIGMOID_BACKWARD, 1.0);
      if (r.defined()) return r;
    }
    // ATen's CPU backward reads the buffer its forward fills: give it one.
    const at::Tensor filled = buffer.numel() == self.numel() ? buffer : self.abs().neg().exp();
    return run_on_fallback<at::Tensor, T, T, T>(kernel_key(&backward), grad, self, filled);
  }
};

// where(condition, self, other): condition bool, self and other of one
// float result type (0-dim CPU tensors as values).
struct Where {
  static at::Tensor functional(T condition, T self, T other) {
    if (eligible({&condition, &self, &other}) && condition.scalar_type() == at::kBool &&
        condition.device().type() == c10::DeviceType::PrivateUse1) {
      const at::ScalarType type = at::result_type(self, other);
      auto matches = [&](T t) { return t.device().is_cpu() || t.scalar_type() == type; };
      if (entry_dtype(type) && matches(self) && matches(other)) {
        at::Tensor result = at::empty({0}, condition.options().dtype(type));
        at::Tensor r = through_entry(
            [&] {
              return at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .allow_cpu_scalars(true)
                  .add_output(result)
                  .add_const_input(condition)
                  .add_const_input(self)
                  .add_const_input(other)
                  .build();
            },
            KPDR_POINTWISE_WHERE, 1.0);
        if (r.defined()) return r;
      }
    }
    return run_on_fallback<at::Tensor, T, T, T>(kernel_key(&functional), condition, self, other);
  }
};

// ---- fills ----------------------------------------------------------------

bool fill_with(const at::Tensor& self, double value) {
  if (!eligible({&self}, false)) return false;
  at::TensorIterator iter = at::TensorIteratorConfig()
                                .set_check_mem_overlap(false)
                                .check_all_same_dtype(false)
                                .resize_outputs(false)
                                .add_output(self)
                                .build();
  return runtime_fill(iter, value);
}

struct Fill {
  static at::Tensor& fill(at::Tensor& self, S value) {
    if (real(value) && fill_with(self, value.toDouble())) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&, S>(kernel_key(&fill), self, value);
  }
  static at::Tensor& zero(at::Tensor& self) {
    if (fill_with(self, 0.0)) return self;
    return run_on_fallback<at::Tensor&, at::Tensor&>(kernel_key(&zero), self);
  }
};

// ---- mse_loss -------------------------------------------------------------

// mse_loss and its backward composed of entry calls (ATen's own formulas);
// each step falls back by itself where the entry cannot take it.
struct MseLoss {
  static at::Tensor forward(T self, T target, int64_t reduction) {
    if (eligible({&self, &target}, false) && float_inputs({&self, &target}) &&
        reduction >= at::Reduction::None && reduction <= at::Reduction::Sum) {
      const at::Tensor d = at::sub(self, target);
      const at::Tensor squared = at::mul(d, d);
      if (reduction == at::Reduction::Mean) return at::mean(squared);
      if (reduction == at::Reduction::Sum) return at::sum(squared);
      return squared;
    }
    return run_on_fallback<at::Tensor, T, T, int64_t>(kernel_key(&forward), self, target,
                                                      reduction);
  }
  static at::Tensor backward(T grad, T self, T target, int64_t reduction) {
    if (eligible({&grad, &self, &target}, false) && float_inputs({&grad, &self, &target}) &&
        reduction >= at::Reduction::None && reduction <= at::Reduction::Sum) {
      // grad_input = norm * (self - target) * grad, norm = 2 (/ numel for the mean)
      const double norm = reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
      const at::Tensor d = at::sub(self, target);
      return at::mul(at::mul(d, grad), norm);
    }
    return run_on_fallback<at::Tensor, T, T, T, int64_t>(kernel_key(&backward), grad, self,
                                                         target, reduction);
  }
};

}  // namespace

bool runtime_fill(at::TensorIteratorBase& iter, double value) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.pointwise == nullptr || iter.ndim() > KPDR_MAX_DIMS || iter.noutputs() != 1 || iter.ninputs() != 0) {
    return false;
  }
  const auto dtype = entry_dtype(iter.dtype(0));
  if (!dtype) return false;
  kpdrPointwiseArgs args{};
  args.op = KPDR_POINTWISE_COPY;
  args.alpha = 1.0;
  const int nd = iter.ndim();
  args.ndim = nd;
  const auto bytes = iter.strides(0);
  const int64_t size = iter.element_size(0);
  for (int d = 0; d < nd; ++d) {
    args.sizes[nd - 1 - d] = iter.shape()[d];
    args.out_strides[nd - 1 - d] = bytes[d] / size;
  }
  args.out_dtype = *dtype;
  args.in[0].data = nullptr;
  // Integer outputs are filled in integer arithmetic (a bool one in float: 0.5 is true).
  const bool integer = *dtype == KPDR_DTYPE_INT64 || *dtype == KPDR_DTYPE_INT32;
  args.in[0].dtype = integer ? KPDR_DTYPE_INT64 : KPDR_DTYPE_FLOAT32;
  args.in[0].value = integer ? static_cast<double>(static_cast<int64_t>(value)) : value;
  const c10::Device device = iter.device(0);
  c10::DeviceGuard guard(device);
  if (iter.numel() == 0) return true;
  args.out = iter.data_ptr(0);
  return launch_kernel(kernels.pointwise, args, current_stream(device.index()));
}

void register_runtime_pointwise(Registrar& r) {
  if (runtime_kernels().pointwise == nullptr) return;
#define KP_UNARY(name, code, kind)                                              \
  r.impl(name, TORCH_FN((Unary<code, Iter::kind>::functional)));               \
  r.impl(name "_", TORCH_FN((Unary<code, Iter::kind>::inplace)));              \
  r.impl(name ".out", TORCH_FN((Unary<code, Iter::kind>::out)))
  KP_UNARY("neg", KPDR_POINTWISE_NEG, kUnary);
  KP_UNARY("exp", KPDR_POINTWISE_EXP, kUnaryFloat);
  KP_UNARY("log", KPDR_POINTWISE_LOG, kUnaryFloat);
  KP_UNARY("sqrt", KPDR_POINTWISE_SQRT, kUnaryFloat);
  KP_UNARY("rsqrt", KPDR_POINTWISE_RSQRT, kUnaryFloat);
  KP_UNARY("sigmoid", KPDR_POINTWISE_SIGMOID, kUnaryFloat);
  KP_UNARY("tanh", KPDR_POINTWISE_TANH, kUnaryFloat);
  KP_UNARY("silu", KPDR_POINTWISE_SILU, kUnary);
  KP_UNARY("sign", KPDR_POINTWISE_SIGN, kUnary);
  KP_UNARY("cos", KPDR_POINTWISE_COS, kUnaryFloat);
  KP_UNARY("sin", KPDR_POINTWISE_SIN, kUnaryFloat);
  KP_UNARY("log1p", KPDR_POINTWISE_LOG1P, kUnaryFloat);
  KP_UNARY("expm1", KPDR_POINTWISE_EXPM1, kUnaryFloat);
  KP_UNARY("erf", KPDR_POINTWISE_ERF, kUnaryFloat);
  KP_UNARY("floor", KPDR_POINTWISE_FLOOR, kUnary);
  KP_UNARY("ceil", KPDR_POINTWISE_CEIL, kUnary);
  KP_UNARY("round", KPDR_POINTWISE_ROUND, kUnary);
  KP_UNARY("trunc", KPDR_POINTWISE_TRUNC, kUnary);
  KP_UNARY("hardswish", KPDR_POINTWISE_HARDSWISH, kUnary);
  KP_UNARY("mish", KPDR_POINTWISE_MISH, kUnary);
#undef KP_UNARY
  r.impl("leaky_relu", TORCH_FN(LeakyRelu::functional));
  r.impl("leaky_relu_", TORCH_FN(LeakyRelu::inplace));
  r.impl("leaky_relu_backward", TORCH_FN(LeakyRelu::backward));
  r.impl("isnan", TORCH_FN(isnan));
  r.impl("hardswish_backward",
         TORCH_FN((Binary<KPDR_POINTWISE_HARDSWISH_BACKWARD, Iter::kBinary, false>::functional)));
  // A binary op's functional, in-place and out= overloads (their names differ by family).
#define KP_BINARY3(functional_name, inplace_name, out_name, code, kind)           \
  r.impl(functional_name, TORCH_FN((Binary<code, Iter::kind, true>::functional))); \
  r.impl(inplace_name, TORCH_FN((Binary<code, Iter::kind, true>::inplace)));       \
  r.impl(out_name, TORCH_FN((Binary<code, Iter::kind, true>::out)))
  KP_BINARY3("atan2", "atan2_", "atan2.out", KPDR_POINTWISE_ATAN2, kBinaryFloat);
  KP_BINARY3("fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out", KPDR_POINTWISE_FMOD, kBinary);
  KP_BINARY3("remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out", KPDR_POINTWISE_REMAINDER, kBinary);
  KP_BINARY3("xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor", KPDR_POINTWISE_XLOGY, kBinaryFloat);
  r.impl("clamp", TORCH_FN(Clamp::functional));
  r.impl("clamp_", TORCH_FN(Clamp::inplace));
  r.impl("clamp_min", TORCH_FN(Clamp::min));
  r.impl("clamp_min_", TORCH_FN(Clamp::min_));
  r.impl("clamp_max", TORCH_FN(Clamp::max));
  r.impl("clamp_max_", TORCH_FN(Clamp::max_));
  r.impl("softplus", TORCH_FN(Softplus::forward));
  r.impl("softplus_backward", TORCH_FN(Softplus::backward));
  r.impl("log_sigmoid_forward", TORCH_FN(LogSigmoid::forward));
  r.impl("log_sigmoid_backward", TORCH_FN(LogSigmoid::backward));
  // sgn: real inputs only (complex ones fall back); a kernel of its own (tag).
  r.impl("sgn", TORCH_FN((Unary<KPDR_POINTWISE_SIGN, Iter::kUnary, 1>::functional)));
  r.impl("sgn_", TORCH_FN((Unary<KPDR_POINTWISE_SIGN, Iter::kUnary, 1>::inplace)));
  r.impl("sgn.out", TORCH_FN((Unary<KPDR_POINTWISE_SIGN, Iter::kUnary, 1>::out)));
  r.impl("abs.out", TORCH_FN((Unary<KPDR_POINTWISE_ABS, Iter::kUnary>::out)));
  r.impl("abs_", TORCH_FN((Unary<KPDR_POINTWISE_ABS, Iter::kUnary>::inplace)));
  r.impl("relu", TORCH_FN((Unary<KPDR_POINTWISE_RELU, Iter::kUnary>::functional)));
  r.impl("relu_", TORCH_FN((Unary<KPDR_POINTWISE_RELU, Iter::kUnary>::inplace)));
  r.impl("pow.Tensor_Scalar", TORCH_FN(PowScalar::functional));
  r.impl("gelu", TORCH_FN(Gelu::functional));
  r.impl("gelu_", TORCH_FN(Gelu::inplace));
  r.impl("gelu_backward", TORCH_FN(Gelu::backward));

  using Add = Binary<KPDR_POINTWISE_ADD, Iter::kBinary, true>;
  using Sub = Binary<KPDR_POINTWISE_SUB, Iter::kBinary, true>;
  r.impl("add.Tensor", TORCH_FN(Add::functional_alpha));
  r.impl("add_.Tensor", TORCH_FN(Add::inplace_alpha));
  r.impl("add.out", TORCH_FN(Add::out_alpha));
  r.impl("sub.Tensor", TORCH_FN(Sub::functional_alpha));
  r.impl("sub_.Tensor", TORCH_FN(Sub::inplace_alpha));
  r.impl("sub.out", TORCH_FN(Sub::out_alpha));
  KP_BINARY3("mul.Tensor", "mul_.Tensor", "mul.out", KPDR_POINTWISE_MUL, kBinary);
  KP_BINARY3("div.Tensor", "div_.Tensor", "div.out", KPDR_POINTWISE_DIV, kBinaryFloat);
  // integer and bool tensors (float ones: NOT_SUPPORTED, and the fallback raises ATen's error)
  KP_BINARY3("bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out", KPDR_POINTWISE_BITWISE_AND, kBinary);
  KP_BINARY3("bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out", KPDR_POINTWISE_BITWISE_OR, kBinary);
  KP_BINARY3("bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out", KPDR_POINTWISE_BITWISE_XOR, kBinary);
#undef KP_BINARY3
  r.impl("maximum", TORCH_FN((Binary<KPDR_POINTWISE_MAXIMUM, Iter::kBinary, true>::functional)));
  r.impl("minimum", TORCH_FN((Binary<KPDR_POINTWISE_MINIMUM, Iter::kBinary, true>::functional)));
#define KP_COMPARE(name, code)                                                              \
  r.impl(name ".Tensor", TORCH_FN((Binary<code, Iter::kComparison, true>::functional)));    \
  r.impl(name ".Scalar", TORCH_FN((Binary<code, Iter::kComparison, true>::functional_scalar)))
  KP_COMPARE("eq", KPDR_POINTWISE_EQ);
  KP_COMPARE("ne", KPDR_POINTWISE_NE);
  KP_COMPARE("lt", KPDR_POINTWISE_LT);
  KP_COMPARE("le", KPDR_POINTWISE_LE);
  KP_COMPARE("gt", KPDR_POINTWISE_GT);
  KP_COMPARE("ge", KPDR_POINTWISE_GE);
#undef KP_COMPARE
  // The activations' backward: CUDA checks every tensor's device for these
  // (no CPU scalars), so does this.
  r.impl("threshold_backward",
         TORCH_FN((Binary<KPDR_POINTWISE_THRESHOLD_BACKWARD, Iter::kBinary, false>::functional_threshold)));
  r.impl("sigmoid_backward", TORCH_FN((Binary<KPDR_POINTWISE_SIGMOID_BACKWARD, Iter::kBinary, false>::functional)));
  r.impl("tanh_backward", TORCH_FN((Binary<KPDR_POINTWISE_TANH_BACKWARD, Iter::kBinary, false>::functional)));
  r.impl("silu_backward", TORCH_FN((Binary<KPDR_POINTWISE_SILU_BACKWARD, Iter::kBinary, false>::functional)));
  r.impl("lerp.Scalar", TORCH_FN((Binary<KPDR_POINTWISE_LERP, Iter::kBinary, true>::functional_weight)));
  r.impl("lerp_.Scalar", TORCH_FN((Binary<KPDR_POINTWISE_LERP, Iter::kBinary, true>::inplace_weight)));

  r.impl("addcmul", TORCH_FN(AddC<KPDR_POINTWISE_ADDCMUL>::functional));
  r.impl("addcmul_", TORCH_FN(AddC<KPDR_POINTWISE_ADDCMUL>::inplace));
  r.impl("addcdiv", TORCH_FN(AddC<KPDR_POINTWISE_ADDCDIV>::functional));
  r.impl("addcdiv_", TORCH_FN(AddC<KPDR_POINTWISE_ADDCDIV>::inplace));
  r.impl("where.self", TORCH_FN(Where::functional));
  r.impl("fill_.Scalar", TORCH_FN(Fill::fill));
  r.impl("zero_", TORCH_FN(Fill::zero));
  if (runtime_kernels().reduce != nullptr) {
    r.impl("mse_loss", TORCH_FN(MseLoss::forward));
  }
  r.impl("mse_loss_backward", TORCH_FN(MseLoss::backward));
}

}  // namespace kernel_pytorch::native
