// What the CPU kernel families share, compiled per ISA level with them. Each
// kernel works on float lanes and converts the storage type (float, BF16,
// Half) at load and store; tails narrower than a vector run on scalars.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/vec.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

constexpr int W = Vec::kSize;

template <typename T> inline const T* at(const void* p, int64_t offset) {
  return static_cast<const T*>(p) + offset;
}
template <typename T> inline T* at(void* p, int64_t offset) { return static_cast<T*>(p) + offset; }

// Converts n elements to float.
template <typename T> inline void to_floats(const T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) Vec::load(src + i).store(dst + i);
  for (; i < n; ++i) dst[i] = to_float(src[i]);
}

// Calls fn with the kernel's storage type.
template <typename Fn> inline void with_dtype(kpdrDtype dtype, Fn&& fn) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: fn(float{}); break;
    case KPDR_DTYPE_BFLOAT16: fn(BF16{}); break;
    case KPDR_DTYPE_FLOAT16: fn(Half{}); break;
  }
}

// v rounded to T's precision and back (what storing and reloading gives).
template <typename T> inline Vec rounded(Vec v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    T tmp[W];
    v.store(tmp);
    return Vec::load(tmp);
  }
}

// out[i] = value for i in [begin, end): vec(i) gives the Vec at i, scalar(i)
// the float at i (the ends narrower than a vector). With `stream` the vector
// stores are non-temporal, after a scalar head that reaches an address aligned
// to a whole vector; the caller fences (Vec::fence) at the end of its task.
template <typename T, typename VecFn, typename ScalarFn>
inline void write_span(T* out, int64_t begin, int64_t end, bool stream, VecFn&& vec, ScalarFn&& scalar) {
  int64_t i = begin;
  if (stream) {
    constexpr uintptr_t kAlign = W * sizeof(T);
    for (; i < end && reinterpret_cast<uintptr_t>(out + i) % kAlign != 0; ++i) out[i] = from_float<T>(scalar(i));
    for (; i + W <= end; i += W) vec(i).stream(out + i);
  } else {
    for (; i + W <= end; i += W) vec(i).store(out + i);
  }
  for (; i < end; ++i) out[i] = from_float<T>(scalar(i));
}

#if defined(KP_VEC_AVX512_BF16)
// write_span for bfloat16 outputs of element-wise arithmetic, 2 * W elements
// at a time: pair(i, even, odd) sets the vectors of elements i, i + 2, ...
// and i + 1, i + 3, ... (from Vec::load_deinterleaved), which
// Vec::store_interleaved rounds and writes in order. That skips the widening
// and narrowing shuffles of Vec::load / Vec::store, which cost as much as the
// arithmetic in the cheaper kernels.
template <typename PairFn, typename ScalarFn>
inline void write_span_pairs(BF16* out, int64_t begin, int64_t end, bool stream, PairFn&& pair, ScalarFn&& scalar) {
  int64_t i = begin;
  if (stream) {
    for (; i < end && reinterpret_cast<uintptr_t>(out + i) % 64 != 0; ++i) out[i] = from_float<BF16>(scalar(i));
  }
  for (; i + 2 * W <= end; i += 2 * W) {
    Vec e, o;
    pair(i, e, o);
    Vec::store_interleaved(out + i, e, o, stream);
  }
  for (; i < end; ++i) out[i] = from_float<BF16>(scalar(i));
}
#endif

template <typename T> inline bool vector_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (W * sizeof(T)) == 0;
}

inline void put(Vec v, float* p, bool stream) { stream ? v.stream(p) : v.store(p); }
inline void put(Vec v, BF16* p, bool stream) { stream ? v.stream(p) : v.store(p); }
inline void put(Vec v, Half* p, bool stream) { stream ? v.stream(p) : v.store(p); }

// Rows per task so a task moves at least ~64 KiB.
inline int64_t grain_for(int64_t row_elems) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_elems)); }

}  // namespace kp::cpu::KP_CPU_CAPABILITY
