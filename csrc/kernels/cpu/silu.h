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

#if defined(KP_VEC_AVX512_BF16)
// bfloat16 silu / silu_and_mul on (even, odd) lane pairs (write_span_pairs):
// the loads and stores of write_span cost about as much as silu itself here.
// The same arithmetic as silu_vec<BF16>, lane by lane.
inline void silu_block_bf16(const BF16* x, const BF16* up, BF16* out, int64_t c0, int64_t c1, bool stream) {
  auto scalar = [&](int64_t i) {
    const float s = silu_scalar(to_float(x[i]));
    return up != nullptr ? s * to_float(up[i]) : s;
  };
  write_span_pairs(out, c0, c1, stream, [&](int64_t i, Vec& e, Vec& o) {
    Vec::load_deinterleaved(x + i, e, o);
    e = silu_vec<BF16>(e);
    o = silu_vec<BF16>(o);
    if (up != nullptr) {
      Vec ue, uo;
      Vec::load_deinterleaved(up + i, ue, uo);
      e = e * ue;
      o = o * uo;
    }
  }, scalar);
}
#endif

template <typename T>
void silu_block(const kpdrSiluArgs& a, int64_t r, int64_t c0, int64_t c1, bool stream) {
  const T* x = at<T>(a.x, r * a.x_row_stride);
  T* out = at<T>(a.out, r * a.out_row_stride);
#if defined(KP_VEC_AVX512_BF16)
  if constexpr (std::is_same_v<T, BF16>) {
    silu_block_bf16(x, a.gated ? x + a.cols : nullptr, out, c0, c1, stream);
    return;
  }
#endif
  if (a.gated) {
    const T* up = x + a.cols;
    write_span(out, c0, c1, stream, [&](int64_t i) { return silu_vec<T>(Vec::load(x + i)) * Vec::load(up + i); },
               [&](int64_t i) { return silu_scalar(to_float(x[i])) * to_float(up[i]); });
  } else {
    write_span(out, c0, c1, stream, [&](int64_t i) { return silu_vec<T>(Vec::load(x + i)); },
               [&](int64_t i) { return silu_scalar(to_float(x[i])); });
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
