// kpdrScanArgs on the CPU: the simulator's scan entry. Lines (every index of
// `sizes` but `dim`) run in parallel, each serially from its first element,
// so the result does not depend on the thread count. Float scans accumulate
// in double, as ATen's CPU cumsum/cumprod/logcumsumexp do for float32, so the
// simulator matches the CPU's values; integer scans are exact int64 (wrapping).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "element_access.h"
#include "kernels/kernels.h"

namespace kp {
namespace {

int64_t load_integer(const void* base, kpdrDtype dtype, int64_t i) {
  switch (dtype) {
    case KPDR_DTYPE_BOOL: return static_cast<const uint8_t*>(base)[i] != 0 ? 1 : 0;
    case KPDR_DTYPE_INT32: return static_cast<const int32_t*>(base)[i];
    default: return static_cast<const int64_t*>(base)[i];
  }
}

void store_integer(void* base, kpdrDtype dtype, int64_t i, int64_t v) {
  if (dtype == KPDR_DTYPE_INT32) static_cast<int32_t*>(base)[i] = static_cast<int32_t>(static_cast<uint32_t>(v));
  else static_cast<int64_t*>(base)[i] = v;
}

double combine(int32_t op, double a, double b) {
  switch (op) {
    case KPDR_SCAN_SUM: return a + b;
    case KPDR_SCAN_PROD: return a * b;
    case KPDR_SCAN_MAX: return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
    case KPDR_SCAN_MIN: return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<double>::quiet_NaN() : std::min(a, b);
    default: {  // LOGADDEXP
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      const double hi = std::max(a, b), lo = std::min(a, b);
      if (hi == lo && std::isinf(hi)) return hi;  // both -inf, or both +inf
      return hi + std::log1p(std::exp(lo - hi));
    }
  }
}

int64_t combine(int32_t op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case KPDR_SCAN_SUM: return static_cast<int64_t>(ua + ub);
    case KPDR_SCAN_PROD: return static_cast<int64_t>(ua * ub);
    case KPDR_SCAN_MAX: return std::max(a, b);
    default: return std::min(a, b);
  }
}

double float_identity(int32_t op) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (op) {
    case KPDR_SCAN_SUM: return 0.0;
    case KPDR_SCAN_PROD: return 1.0;
    case KPDR_SCAN_MIN: return inf;
    default: return -inf;  // MAX, LOGADDEXP
  }
}

int64_t integer_identity(int32_t op) {
  switch (op) {
    case KPDR_SCAN_SUM: return 0;
    case KPDR_SCAN_PROD: return 1;
    case KPDR_SCAN_MAX: return std::numeric_limits<int64_t>::min();
    default: return std::numeric_limits<int64_t>::max();
  }
}

}  // namespace

bool scan_integer(const kpdrScanArgs& a) {
  return a.out_dtype == KPDR_DTYPE_INT64 || a.out_dtype == KPDR_DTYPE_INT32;
}

void scan(const kpdrScanArgs& a) {
  const int nd = a.ndim;
  const int64_t length = a.sizes[a.dim];
  int64_t lines = 1;
  for (int d = 0; d < nd; ++d) lines *= d == a.dim ? 1 : a.sizes[d];
  if (lines == 0 || length == 0) return;
  const int64_t in_step = a.in_strides[a.dim], out_step = a.out_strides[a.dim];
  const bool integer = scan_integer(a);
  parallel_for(0, lines, std::max<int64_t>(1, 4096 / length), [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      int64_t rest = line, in = 0, out = 0;
      for (int d = nd - 1; d >= 0; --d) {
        if (d == a.dim) continue;
        const int64_t at = rest % a.sizes[d];
        rest /= a.sizes[d];
        in += at * a.in_strides[d];
        out += at * a.out_strides[d];
      }
      if (integer) {
        int64_t acc = integer_identity(a.op);
        for (int64_t j = 0; j < length; ++j, in += in_step, out += out_step) {
          const int64_t next = combine(a.op, acc, load_integer(a.in, a.in_dtype, in));  // read before an in-place write
          store_integer(a.out, a.out_dtype, out, a.exclusive ? acc : next);
          acc = next;
        }
      } else {
        double acc = float_identity(a.op);
        for (int64_t j = 0; j < length; ++j, in += in_step, out += out_step) {
          const double next = combine(a.op, acc, static_cast<double>(load(a.in, a.in_dtype, in)));
          store(a.out, a.out_dtype, out, static_cast<float>(a.exclusive ? acc : next));
          acc = next;
        }
      }
    }
  });
}

}  // namespace kp
