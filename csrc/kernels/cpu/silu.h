// silu and silu_and_mul (gated: silu(x[..., :d]) * x[..., d:]).
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

inline float silu_scalar(float v) { return v / (1.f + sexp(-v)); }
// exp(-x) stays finite (vexp_neg clamps), so 1 + exp(-x) is never infinite.
template <typename T> inline Vec silu_vec(Vec v) {
  constexpr ExpPrecision P = std::is_same_v<T, float> ? ExpPrecision::kFloat : ExpPrecision::kShort;
  const Vec d = Vec::set1(1.f) + vexp_neg<P>(v);
  if constexpr (Vec::kDivideIsCheap) {
    return v / d;
  } else {
    return v * d.reciprocal();
  }
}

// A chunk at a time (write_chunks): for bfloat16 at the AVX-512 levels the
// even and odd lanes, whose loads and stores cost no shuffles.
template <typename T>
void silu_block(const kpdrSiluArgs& a, int64_t r, int64_t c0, int64_t c1, bool stream) {
  const T* x = at<T>(a.x, r * a.x_row_stride);
  const T* up = a.gated ? x + a.cols : nullptr;
  T* out = at<T>(a.out, r * a.out_row_stride);
  // Gate and up are asked for 2 KiB ahead (prefetch_lines; past the row's
  // end is harmless: a prefetch never faults). One thread on the development
  // machine: 0.79 -> 1.0 of a copy (1 and 4 KiB: 0.9-0.95); on the 16-core
  // Xeon at 1 / 4 / 16 threads 1.01 / 0.91 / 0.82 of a copy without,
  // 1.04 / 1.05 / 1.11 with.
  constexpr int64_t kAhead = 2048 / sizeof(T);
  auto scalar = [&](int64_t i) {
    const float s = silu_scalar(to_float(x[i]));
    return up != nullptr ? s * to_float(up[i]) : s;
  };
  if (up != nullptr) {
    write_chunks(out, c0, c1, stream, [&](int64_t i, Vec& v0, Vec& v1) {
      Vec u0, u1;
      prefetch_lines(x + i + kAhead, Chunk<T>::kSize * sizeof(T));
      prefetch_lines(up + i + kAhead, Chunk<T>::kSize * sizeof(T));
      Chunk<T>::load(x + i, v0, v1);
      Chunk<T>::load(up + i, u0, u1);
      v0 = silu_vec<T>(v0) * u0;
      v1 = silu_vec<T>(v1) * u1;
    }, scalar);
  } else {
    write_chunks(out, c0, c1, stream, [&](int64_t i, Vec& v0, Vec& v1) {
      Chunk<T>::load(x + i, v0, v1);
      v0 = silu_vec<T>(v0);
      v1 = silu_vec<T>(v1);
    }, scalar);
  }
}

void silu(const kpdrSiluArgs& a) {
  // Tasks are (row, column block) so one long row still spreads over threads.
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (a.cols + kBlock - 1) / kBlock;
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    const bool stream = use_streaming_stores(a.rows * a.cols * int64_t(sizeof(T)));
    kp::parallel_for(0, a.rows * blocks, std::max<int64_t>(1, 4 / blocks), [&](int64_t b, int64_t e) {
      for (int64_t task = b; task < e; ++task) {
        const int64_t r = task / blocks, c0 = (task % blocks) * kBlock;
        silu_block<T>(a, r, c0, std::min(a.cols, c0 + kBlock), stream);
      }
      if (stream) Vec::fence();
    });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
