// rms_norm and fused_add_rms_norm (a residual given): one pass summing squares,
// one writing x * rstd * weight.
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

template <typename T>
void rms_norm_rows(const kpdrRmsNormArgs& a, int64_t r0, int64_t r1, bool stream) {
  const int64_t n = a.cols;
  const T* w = static_cast<const T*>(a.weight);
  // With streaming stores, the rounded sums x + residual of the row are kept
  // here for the second pass: residual_out has gone past the cache.
  std::vector<float> sums(a.residual != nullptr && stream ? n : 0);
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = at<T>(a.x, r * a.x_row_stride);
    T* out = at<T>(a.out, r * a.out_row_stride);
    const T* res = a.residual != nullptr ? at<T>(a.residual, r * a.residual_row_stride) : nullptr;
    Vec acc0 = Vec::zero(), acc1 = Vec::zero();
    float ss = 0.f;
    T* res_out = res != nullptr ? at<T>(a.residual_out, r * a.residual_out_row_stride) : nullptr;
    if (res != nullptr) {
      // Sum in float, round to the storage type, and normalise the rounded
      // values: exactly what x + residual followed by rms_norm computes.
      float* keep = sums.data();
      if (!stream) {  // store, and read the rounded values back from L1 (one conversion)
        int64_t i = 0;
#if defined(KP_VEC_AVX512_BF16)
        if constexpr (std::is_same_v<T, BF16>) {  // in (even, odd) pairs, see write_span_pairs
          for (; i + 2 * W <= n; i += 2 * W) {
            Vec xe, xo, re, ro;
            Vec::load_deinterleaved(x + i, xe, xo);
            Vec::load_deinterleaved(res + i, re, ro);
            Vec::store_interleaved(res_out + i, xe + re, xo + ro, false);
            Vec::load_deinterleaved(res_out + i, re, ro);
            acc0 = Vec::fmadd(re, re, acc0);
            acc1 = Vec::fmadd(ro, ro, acc1);
          }
        }
#endif
        for (; i + W <= n; i += W) {
          (Vec::load(x + i) + Vec::load(res + i)).store(res_out + i);
          const Vec s = Vec::load(res_out + i);
          acc0 = Vec::fmadd(s, s, acc0);
        }
        for (; i < n; ++i) {
          res_out[i] = from_float<T>(to_float(x[i]) + to_float(res[i]));
          const float s = to_float(res_out[i]);
          ss += s * s;
        }
      } else {  // streamed: the rounded values are kept in float for the second pass
        write_span(res_out, 0, n, true,
                   [&](int64_t i) {
                     const Vec s = rounded<T>(Vec::load(x + i) + Vec::load(res + i));
                     s.store(keep + i);
                     acc0 = Vec::fmadd(s, s, acc0);
                     return s;
                   },
                   [&](int64_t i) {
                     const float s = to_float(from_float<T>(to_float(x[i]) + to_float(res[i])));
                     keep[i] = s;
                     ss += s * s;
                     return s;
                   });
      }
    } else {
      int64_t i = 0;
#if defined(KP_VEC_AVX512_BF16)
      if constexpr (std::is_same_v<T, BF16>) {  // the sum does not care about lane order
        for (; i + 2 * W <= n; i += 2 * W) {
          Vec s0, s1;
          Vec::load_deinterleaved(x + i, s0, s1);
          acc0 = Vec::fmadd(s0, s0, acc0);
          acc1 = Vec::fmadd(s1, s1, acc1);
        }
      }
#endif
      for (; i + 2 * W <= n; i += 2 * W) {
        Vec s0 = Vec::load(x + i), s1 = Vec::load(x + i + W);
        acc0 = Vec::fmadd(s0, s0, acc0);
        acc1 = Vec::fmadd(s1, s1, acc1);
      }
      for (; i + W <= n; i += W) {
        Vec s = Vec::load(x + i);
        acc0 = Vec::fmadd(s, s, acc0);
      }
      for (; i < n; ++i) ss += to_float(x[i]) * to_float(x[i]);
    }
    ss += (acc0 + acc1).reduce_add();
    const float inv = 1.f / std::sqrt(ss / float(n) + a.eps);
    if (a.rstd != nullptr) static_cast<float*>(a.rstd)[r] = inv;
    const Vec vinv = Vec::set1(inv);
    // out = src * inv * w, src being the row just summed (x, or residual_out
    // read back while it is still in L1).
    auto normalise = [&](const T* src, bool streamed) {
      auto scalar = [&](int64_t i) { return to_float(src[i]) * inv * to_float(w[i]); };
#if defined(KP_VEC_AVX512_BF16)
      if constexpr (std::is_same_v<T, BF16>) {
        write_span_pairs(out, 0, n, streamed, [&](int64_t i, Vec& e, Vec& o) {
          Vec we, wo;
          Vec::load_deinterleaved(src + i, e, o);
          Vec::load_deinterleaved(w + i, we, wo);
          e = e * vinv * we;
          o = o * vinv * wo;
        }, scalar);
        return;
      }
#endif
      write_span(out, 0, n, streamed, [&](int64_t i) { return Vec::load(src + i) * vinv * Vec::load(w + i); }, scalar);
    };
    if (res != nullptr && !stream) {
      normalise(res_out, false);
    } else if (res != nullptr) {
      const float* keep = sums.data();
      write_span(out, 0, n, true, [&](int64_t i) { return Vec::load(keep + i) * vinv * Vec::load(w + i); },
                 [&](int64_t i) { return keep[i] * inv * to_float(w[i]); });
    } else {
      normalise(x, stream);
    }
  }
  if (stream) Vec::fence();
}

void rms_norm(const kpdrRmsNormArgs& a) {
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    const bool stream = use_streaming_stores(a.rows * a.cols * int64_t(sizeof(T)));  // per output
    kp::parallel_for(0, a.rows, grain_for(a.cols), [&](int64_t b, int64_t e) { rms_norm_rows<T>(a, b, e, stream); });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
