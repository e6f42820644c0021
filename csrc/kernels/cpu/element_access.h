// Reading and writing one element of a kpdrDtype buffer as float: the
// core-op kernels (pointwise, losses, conv) take every operand through these.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kpdr.h"
#include "scalar.h"

namespace kp {

inline float load(const void* base, kpdrDtype dtype, int64_t i) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: return static_cast<const float*>(base)[i];
    case KPDR_DTYPE_FLOAT16: return to_float(static_cast<const Half*>(base)[i]);
    case KPDR_DTYPE_BFLOAT16: return to_float(static_cast<const BF16*>(base)[i]);
    case KPDR_DTYPE_BOOL: return static_cast<const uint8_t*>(base)[i] != 0 ? 1.0f : 0.0f;
    case KPDR_DTYPE_INT64: return static_cast<float>(static_cast<const int64_t*>(base)[i]);
    case KPDR_DTYPE_INT32: return static_cast<float>(static_cast<const int32_t*>(base)[i]);
  }
  return 0.0f;
}

// Float to integer: toward zero, saturated, NaN as 0 (kpdr.h leaves them unspecified).
template <typename I>
inline I to_integer(float v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<float>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<float>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

inline void store(void* base, kpdrDtype dtype, int64_t i, float v) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: static_cast<float*>(base)[i] = v; return;
    case KPDR_DTYPE_FLOAT16: static_cast<Half*>(base)[i] = from_float<Half>(v); return;
    case KPDR_DTYPE_BFLOAT16: static_cast<BF16*>(base)[i] = from_float<BF16>(v); return;
    case KPDR_DTYPE_BOOL: static_cast<uint8_t*>(base)[i] = v != 0.0f ? 1 : 0; return;
    case KPDR_DTYPE_INT64: static_cast<int64_t*>(base)[i] = to_integer<int64_t>(v); return;
    case KPDR_DTYPE_INT32: static_cast<int32_t*>(base)[i] = to_integer<int32_t>(v); return;
  }
}

}  // namespace kp
