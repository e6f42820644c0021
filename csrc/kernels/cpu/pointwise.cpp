// kpdrPointwiseArgs and kpdrReduceArgs on the CPU: the simulator's generic
// pointwise and reduction entries (kpdr.h's core-op section). Correctness
// first: every operand is read through its own dtype and strides, the op is
// evaluated in float (the formulas ATen's CPU kernels use), and the outer
// index space is spread over threads. The host-addressable simulator keeps
// ATen's own vectorised kernels; this serves its host_addressable=0 mode.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/kernels.h"
#include "element_access.h"
#include "scalar.h"

namespace kp {
namespace {

int64_t load_int(const void* base, kpdrDtype dtype, int64_t i) {
  switch (dtype) {
    case KPDR_DTYPE_INT64: return static_cast<const int64_t*>(base)[i];
    case KPDR_DTYPE_INT32: return static_cast<const int32_t*>(base)[i];
    case KPDR_DTYPE_BOOL: return static_cast<const uint8_t*>(base)[i] != 0 ? 1 : 0;
    default: return 0;
  }
}

void store_int(void* base, kpdrDtype dtype, int64_t i, int64_t v) {
  switch (dtype) {
    case KPDR_DTYPE_INT64: static_cast<int64_t*>(base)[i] = v; return;
    case KPDR_DTYPE_INT32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(static_cast<uint64_t>(v)); return;
    case KPDR_DTYPE_BOOL: static_cast<uint8_t*>(base)[i] = v != 0 ? 1 : 0; return;
    default: return;
  }
}

bool integer_dtype(kpdrDtype d) {
  return d == KPDR_DTYPE_INT64 || d == KPDR_DTYPE_INT32 || d == KPDR_DTYPE_BOOL;
}

constexpr float kSqrt1_2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)
constexpr float kTanhBeta = 0.79788456080286535588f;    // sqrt(2 / pi)
constexpr float kTanhKappa = 0.044715f;

float nan_max(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
float nan_min(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The element's position, for the index-dependent codes: i its row-major
// linear index among n, (r, c) its indices in the last two dimensions.
struct Position {
  int64_t i, n, r, c;
};

float apply(int32_t op, float x, float y, float z, float alpha, const Position& at) {
  switch (op) {
    case KPDR_POINTWISE_ERF: return std::erf(x);
    case KPDR_POINTWISE_FLOOR: return std::floor(x);
    case KPDR_POINTWISE_CEIL: return std::ceil(x);
    case KPDR_POINTWISE_ROUND: return std::nearbyint(x);  // the default rounding mode: halves to even
    case KPDR_POINTWISE_TRUNC: return std::trunc(x);
    case KPDR_POINTWISE_HARDSWISH: return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case KPDR_POINTWISE_MISH: return x * std::tanh(std::log1p(std::exp(x)));
    case KPDR_POINTWISE_LEAKY_RELU: return x > 0.0f ? x : x * alpha;
    case KPDR_POINTWISE_HARDSWISH_BACKWARD: return y <= -3.0f ? 0.0f : y < 3.0f ? x * (y / 3.0f + 0.5f) : x;
    case KPDR_POINTWISE_ATAN2: return std::atan2(x, y);
    case KPDR_POINTWISE_FMOD: return std::fmod(x, y);
    case KPDR_POINTWISE_REMAINDER: {
      const float m = std::fmod(x, y);
      return m != 0.0f && ((y < 0.0f) != (m < 0.0f)) ? m + y : m;
    }
    case KPDR_POINTWISE_LEAKY_RELU_BACKWARD: return y > 0.0f ? x : x * alpha;
    case KPDR_POINTWISE_XLOGY: return std::isnan(y) ? NAN : x == 0.0f ? 0.0f : x * std::log(y);
    case KPDR_POINTWISE_LOG1P: return std::log1p(x);
    case KPDR_POINTWISE_EXPM1: return std::expm1(x);
    case KPDR_POINTWISE_LOG_SIGMOID: return std::min(x, 0.0f) - std::log1p(std::exp(-std::fabs(x)));
    case KPDR_POINTWISE_SOFTPLUS: return x * alpha > y ? x : std::log1p(std::exp(x * alpha)) / alpha;
    case KPDR_POINTWISE_LOG_SIGMOID_BACKWARD: {
      // sigmoid(-y) without overflow on either side (ATen's CPU form)
      const float e = std::exp(-std::fabs(y));
      return y < 0.0f ? x / (1.0f + e) : x * e / (1.0f + e);
    }
    case KPDR_POINTWISE_CLAMP: return std::isnan(x) ? x : std::min(std::max(x, y), z);
    case KPDR_POINTWISE_SOFTPLUS_BACKWARD: {
      const float e = std::exp(y * alpha);
      return y * alpha > z ? x : x * e / (e + 1.0f);
    }
    case KPDR_POINTWISE_COS: return std::cos(x);
    case KPDR_POINTWISE_SIN: return std::sin(x);
    case KPDR_POINTWISE_LOGICAL_NOT: return x == 0.0f ? 1.0f : 0.0f;
    case KPDR_POINTWISE_LOGICAL_AND: return x != 0.0f && y != 0.0f ? 1.0f : 0.0f;
    case KPDR_POINTWISE_LOGICAL_OR: return x != 0.0f || y != 0.0f ? 1.0f : 0.0f;
    case KPDR_POINTWISE_NAN_TO_NUM:
      return std::isnan(x) ? alpha : x == std::numeric_limits<float>::infinity() ? y
                                   : x == -std::numeric_limits<float>::infinity() ? z : x;
    case KPDR_POINTWISE_ARANGE: return x + alpha * static_cast<float>(at.i);
    case KPDR_POINTWISE_LINSPACE:
      return at.i < at.n / 2 ? x + alpha * static_cast<float>(at.i) : y - alpha * static_cast<float>(at.n - 1 - at.i);
    case KPDR_POINTWISE_TRIL: return static_cast<float>(at.c - at.r) <= alpha ? x : 0.0f;
    case KPDR_POINTWISE_TRIU: return static_cast<float>(at.c - at.r) >= alpha ? x : 0.0f;
    case KPDR_POINTWISE_COPY: return x;
    case KPDR_POINTWISE_NEG: return -x;
    case KPDR_POINTWISE_ABS: return std::fabs(x);
    case KPDR_POINTWISE_EXP: return std::exp(x);
    case KPDR_POINTWISE_LOG: return std::log(x);
    case KPDR_POINTWISE_SQRT: return std::sqrt(x);
    case KPDR_POINTWISE_RSQRT: return 1.0f / std::sqrt(x);
    case KPDR_POINTWISE_RELU: return std::isnan(x) ? x : std::max(x, 0.0f);
    case KPDR_POINTWISE_GELU: return 0.5f * x * (1.0f + std::erf(x * kSqrt1_2));
    case KPDR_POINTWISE_GELU_TANH:
      return 0.5f * x * (1.0f + std::tanh(kTanhBeta * (x + kTanhKappa * x * x * x)));
    case KPDR_POINTWISE_SILU: return x / (1.0f + std::exp(-x));
    case KPDR_POINTWISE_SIGMOID: return sigmoid(x);
    case KPDR_POINTWISE_TANH: return std::tanh(x);
    case KPDR_POINTWISE_POW_SCALAR:
      return alpha == 2.0f ? x * x : alpha == 0.5f ? std::sqrt(x) : std::pow(x, alpha);
    case KPDR_POINTWISE_SIGN: return static_cast<float>((x > 0.0f) - (x < 0.0f));
    case KPDR_POINTWISE_ADD: return x + alpha * y;
    case KPDR_POINTWISE_SUB: return x - alpha * y;
    case KPDR_POINTWISE_MUL: return x * y;
    case KPDR_POINTWISE_DIV: return x / y;
    case KPDR_POINTWISE_MAXIMUM: return nan_max(x, y);
    case KPDR_POINTWISE_MINIMUM: return nan_min(x, y);
    case KPDR_POINTWISE_EQ: return x == y;
    case KPDR_POINTWISE_NE: return x != y;
    case KPDR_POINTWISE_LT: return x < y;
    case KPDR_POINTWISE_LE: return x <= y;
    case KPDR_POINTWISE_GT: return x > y;
    case KPDR_POINTWISE_GE: return x >= y;
    case KPDR_POINTWISE_LERP: return std::fabs(alpha) < 0.5f ? x + alpha * (y - x) : y - (y - x) * (1.0f - alpha);
    case KPDR_POINTWISE_THRESHOLD_BACKWARD: return y <= alpha ? 0.0f : x;
    case KPDR_POINTWISE_SIGMOID_BACKWARD: return x * (1.0f - y) * y;
    case KPDR_POINTWISE_TANH_BACKWARD: return x * (1.0f - y * y);
    case KPDR_POINTWISE_GELU_BACKWARD: {
      const float cdf = 0.5f * (1.0f + std::erf(y * kSqrt1_2));
      const float pdf = kInvSqrt2Pi * std::exp(-0.5f * y * y);
      return x * (cdf + y * pdf);
    }
    case KPDR_POINTWISE_GELU_TANH_BACKWARD: {
      const float inner = kTanhBeta * (y + kTanhKappa * y * y * y);
      const float t = std::tanh(inner);
      const float left_derivative = 0.5f * (1.0f + t);
      const float right_derivative = 0.5f * y * (1.0f - t * t) * kTanhBeta * (1.0f + 3.0f * kTanhKappa * y * y);
      return x * (left_derivative + right_derivative);
    }
    case KPDR_POINTWISE_SILU_BACKWARD: {
      const float s = sigmoid(y);
      return x * s * (1.0f + y * (1.0f - s));
    }
    case KPDR_POINTWISE_WHERE: return x != 0.0f ? y : z;
    case KPDR_POINTWISE_ADDCMUL: return x + alpha * y * z;
    case KPDR_POINTWISE_ADDCDIV: return x + alpha * y / z;
  }
  return NAN;
}

// Integer arithmetic (kpdr.h): exact, wrapping (through uint64).
int64_t apply_int(int32_t op, int64_t x, int64_t y, int64_t z, int64_t alpha, const Position& at) {
  auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y), ua = static_cast<uint64_t>(alpha);
  switch (op) {
    case KPDR_POINTWISE_COPY: case KPDR_POINTWISE_FLOOR: case KPDR_POINTWISE_CEIL: case KPDR_POINTWISE_ROUND:
    case KPDR_POINTWISE_TRUNC:
      return x;
    case KPDR_POINTWISE_NEG: return wrap(0 - ux);
    case KPDR_POINTWISE_ABS: return x < 0 ? wrap(0 - ux) : x;
    case KPDR_POINTWISE_SIGN: return (x > 0) - (x < 0);
    case KPDR_POINTWISE_LOGICAL_NOT: return x == 0;
    case KPDR_POINTWISE_BITWISE_NOT: return ~x;
    case KPDR_POINTWISE_ADD: return wrap(ux + ua * uy);
    case KPDR_POINTWISE_SUB: return wrap(ux - ua * uy);
    case KPDR_POINTWISE_MUL: return wrap(ux * uy);
    case KPDR_POINTWISE_MAXIMUM: return std::max(x, y);
    case KPDR_POINTWISE_MINIMUM: return std::min(x, y);
    case KPDR_POINTWISE_EQ: return x == y;
    case KPDR_POINTWISE_NE: return x != y;
    case KPDR_POINTWISE_LT: return x < y;
    case KPDR_POINTWISE_LE: return x <= y;
    case KPDR_POINTWISE_GT: return x > y;
    case KPDR_POINTWISE_GE: return x >= y;
    case KPDR_POINTWISE_LOGICAL_AND: return x != 0 && y != 0;
    case KPDR_POINTWISE_LOGICAL_OR: return x != 0 || y != 0;
    case KPDR_POINTWISE_BITWISE_AND: return x & y;
    case KPDR_POINTWISE_BITWISE_OR: return x | y;
    case KPDR_POINTWISE_BITWISE_XOR: return x ^ y;
    case KPDR_POINTWISE_WHERE: return x != 0 ? y : z;
    case KPDR_POINTWISE_ARANGE: return wrap(ux + ua * static_cast<uint64_t>(at.i));
    case KPDR_POINTWISE_TRIL: return at.c - at.r <= alpha ? x : 0;
    case KPDR_POINTWISE_TRIU: return at.c - at.r >= alpha ? x : 0;
  }
  return 0;
}

// Visits [begin, end) of the linear index space of `sizes` (row-major, the
// last dimension fastest) with the running offsets of `count` stride sets.
template <int count, typename Fn>
void walk(int ndim, const int64_t* sizes, const int64_t* const* strides, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;  // also: a zero size never reaches the modulo below
  int64_t index[KPDR_MAX_DIMS] = {};
  int64_t offset[count] = {};
  int64_t rest = begin;
  for (int d = ndim - 1; d >= 0; --d) {
    index[d] = rest % sizes[d];
    rest /= sizes[d];
    for (int k = 0; k < count; ++k) offset[k] += index[d] * strides[k][d];
  }
  for (int64_t i = begin; i < end; ++i) {
    if constexpr (std::is_invocable_v<Fn, const int64_t*>) {
      fn(static_cast<const int64_t*>(offset));
    } else {
      fn(static_cast<const int64_t*>(offset), i, static_cast<const int64_t*>(index));
    }
    for (int d = ndim - 1; d >= 0; --d) {
      for (int k = 0; k < count; ++k) offset[k] += strides[k][d];
      if (++index[d] < sizes[d]) break;
      for (int k = 0; k < count; ++k) offset[k] -= index[d] * strides[k][d];
      index[d] = 0;
    }
  }
}

int64_t element_count(int ndim, const int64_t* sizes) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= sizes[d];
  return n;
}

}  // namespace

int pointwise_arity(int32_t op) {
  if (op >= KPDR_POINTWISE_COPY && op <= KPDR_POINTWISE_LEAKY_RELU) return 1;
  if (op >= KPDR_POINTWISE_ADD && op <= KPDR_POINTWISE_HARDSWISH_BACKWARD) return 2;
  if (op >= KPDR_POINTWISE_THRESHOLD_BACKWARD && op <= KPDR_POINTWISE_XLOGY) return 2;
  if (op >= KPDR_POINTWISE_WHERE && op <= KPDR_POINTWISE_SOFTPLUS_BACKWARD) return 3;
  if (op == KPDR_POINTWISE_ARANGE || op == KPDR_POINTWISE_TRIL || op == KPDR_POINTWISE_TRIU) return 1;
  if (op == KPDR_POINTWISE_LINSPACE) return 2;
  return 0;
}

bool pointwise_integer(const kpdrPointwiseArgs& a) {
  bool integer = integer_dtype(a.out_dtype);
  for (int k = 0; k < pointwise_arity(a.op); ++k) integer = integer && integer_dtype(a.in[k].dtype);
  return integer;
}

bool pointwise_supported(const kpdrPointwiseArgs& a) {
  const int32_t op = a.op;
  if ((op == KPDR_POINTWISE_TRIL || op == KPDR_POINTWISE_TRIU) && a.ndim < 2) return false;
  const bool bitwise = op == KPDR_POINTWISE_BITWISE_NOT ||
                       (op >= KPDR_POINTWISE_BITWISE_AND && op <= KPDR_POINTWISE_BITWISE_XOR);
  if (!pointwise_integer(a)) return !bitwise;
  switch (op) {
    case KPDR_POINTWISE_COPY: case KPDR_POINTWISE_NEG: case KPDR_POINTWISE_ABS: case KPDR_POINTWISE_SIGN:
    case KPDR_POINTWISE_FLOOR: case KPDR_POINTWISE_CEIL: case KPDR_POINTWISE_ROUND: case KPDR_POINTWISE_TRUNC:
    case KPDR_POINTWISE_LOGICAL_NOT: case KPDR_POINTWISE_BITWISE_NOT: case KPDR_POINTWISE_ADD:
    case KPDR_POINTWISE_SUB: case KPDR_POINTWISE_MUL: case KPDR_POINTWISE_MAXIMUM: case KPDR_POINTWISE_MINIMUM:
    case KPDR_POINTWISE_EQ: case KPDR_POINTWISE_NE: case KPDR_POINTWISE_LT: case KPDR_POINTWISE_LE:
    case KPDR_POINTWISE_GT: case KPDR_POINTWISE_GE: case KPDR_POINTWISE_LOGICAL_AND:
    case KPDR_POINTWISE_LOGICAL_OR: case KPDR_POINTWISE_BITWISE_AND: case KPDR_POINTWISE_BITWISE_OR:
    case KPDR_POINTWISE_BITWISE_XOR: case KPDR_POINTWISE_WHERE: case KPDR_POINTWISE_ARANGE:
    case KPDR_POINTWISE_TRIL: case KPDR_POINTWISE_TRIU:
      return true;
  }
  return false;
}

void pointwise(const kpdrPointwiseArgs& a) {
  const int64_t n = element_count(a.ndim, a.sizes);
  const int64_t* strides[4] = {a.out_strides, a.in[0].strides, a.in[1].strides, a.in[2].strides};
  float constant[3];
  for (int k = 0; k < 3; ++k) constant[k] = static_cast<float>(a.in[k].value);
  const float alpha = static_cast<float>(a.alpha);
  const int arity = pointwise_arity(a.op);
  auto position = [&](int64_t i, const int64_t* index) {
    return Position{i, n, a.ndim >= 2 ? index[a.ndim - 2] : 0, a.ndim >= 1 ? index[a.ndim - 1] : 0};
  };
  if (pointwise_integer(a)) {
    int64_t iconstant[3];
    for (int k = 0; k < 3; ++k) iconstant[k] = static_cast<int64_t>(a.in[k].value);
    const int64_t ialpha = static_cast<int64_t>(a.alpha);
    parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
      walk<4>(a.ndim, a.sizes, strides, begin, end, [&](const int64_t* offset, int64_t i, const int64_t* index) {
        int64_t v[3] = {0, 0, 0};
        for (int k = 0; k < arity; ++k) {
          v[k] = a.in[k].data != nullptr ? load_int(a.in[k].data, a.in[k].dtype, offset[k + 1]) : iconstant[k];
        }
        store_int(a.out, a.out_dtype, offset[0], apply_int(a.op, v[0], v[1], v[2], ialpha, position(i, index)));
      });
    });
    return;
  }
  parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
    walk<4>(a.ndim, a.sizes, strides, begin, end, [&](const int64_t* offset, int64_t i, const int64_t* index) {
      float v[3];
      for (int k = 0; k < 3; ++k) {
        v[k] = k < arity && a.in[k].data != nullptr ? load(a.in[k].data, a.in[k].dtype, offset[k + 1]) : constant[k];
      }
      store(a.out, a.out_dtype, offset[0], apply(a.op, v[0], v[1], v[2], alpha, position(i, index)));
    });
  });
}

void reduce(const kpdrReduceArgs& a) {
  if (a.op >= KPDR_REDUCE_ARGMAX || a.out_dtype == KPDR_DTYPE_INT64) return reduce_statistics(a);
  // Split the dimensions into kept (the output's) and reduced ones.
  int kept = 0, reduced = 0;
  int64_t kept_sizes[KPDR_MAX_DIMS], kept_in[KPDR_MAX_DIMS], kept_out[KPDR_MAX_DIMS];
  int64_t red_sizes[KPDR_MAX_DIMS], red_in[KPDR_MAX_DIMS];
  for (int d = 0; d < a.ndim; ++d) {
    if (a.reduce_mask & (1u << d)) {
      red_sizes[reduced] = a.sizes[d];
      red_in[reduced++] = a.in_strides[d];
    } else {
      kept_sizes[kept] = a.sizes[d];
      kept_in[kept] = a.in_strides[d];
      kept_out[kept++] = a.out_strides[d];
    }
  }
  const int64_t outputs = element_count(kept, kept_sizes), count = element_count(reduced, red_sizes);
  const int64_t* outer[2] = {kept_in, kept_out};
  const int64_t* inner[1] = {red_in};
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, count));
  parallel_for(0, outputs, grain, [&](int64_t begin, int64_t end) {
    walk<2>(kept, kept_sizes, outer, begin, end, [&](const int64_t* base) {
      // Sums in double: at least as accurate as ATen's cascaded float sum.
      double sum = 0.0;
      float best = a.op == KPDR_REDUCE_AMAX ? -std::numeric_limits<float>::infinity()
                                            : std::numeric_limits<float>::infinity();
      walk<1>(reduced, red_sizes, inner, 0, count, [&](const int64_t* offset) {
        const float v = load(a.in, a.in_dtype, base[0] + offset[0]);
        if (a.op == KPDR_REDUCE_AMAX) best = nan_max(best, v);
        else if (a.op == KPDR_REDUCE_AMIN) best = nan_min(best, v);
        else sum += v;
      });
      float result = best;
      if (a.op == KPDR_REDUCE_SUM) result = static_cast<float>(sum);
      if (a.op == KPDR_REDUCE_MEAN) result = count == 0 ? NAN : static_cast<float>(sum / count);
      store(a.out, a.out_dtype, base[1], result);
    });
  });
}

}  // namespace kp
