// Rotary position embedding (apply_rope), interleaved or half-split pairs.
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

// cos/sin (of type C) as floats in the lane order of Chunk<T>, the order x's
// chunks are loaded in, which is C's own only when both types chunk alike
// (bfloat16 x with float32 cos/sin: pairs against plain lanes).
template <typename T, typename C>
void chunk_floats_for(const C* src, float* dst, int64_t n) {
  if constexpr (Chunk<T>::kPairs == Chunk<C>::kPairs) {
    chunk_floats(src, dst, n);
  } else {
    int64_t i = 0;
    if constexpr (Chunk<T>::kPairs) {  // even elements, then odd ones, per chunk
      for (; i + Chunk<T>::kSize <= n; i += Chunk<T>::kSize) {
        for (int64_t j = 0; j < W; ++j) {
          dst[i + j] = to_float(src[i + 2 * j]);
          dst[i + W + j] = to_float(src[i + 2 * j + 1]);
        }
      }
    }
    for (; i < n; ++i) dst[i] = to_float(src[i]);
  }
}

template <typename T, typename C>
void rope_positions(const kpdrRopeArgs& a, int64_t p0, int64_t p1, bool stream) {
  const int64_t half = a.head_dim / 2, d = a.head_dim;
  const float sign = a.inverse ? -1.f : 1.f;
  std::vector<float> cs(2 * d);  // per position: cos and signed sin, laid out for the kernel
  // x is asked into L2 about 2 KiB ahead (prefetch_lines), as silu_and_mul
  // does: from memory, rope's own loads keep too few lines in flight. On the
  // 16-core Xeon, bfloat16 [1, 2048, 32, 128], of a copy at 1 / 4 / 16
  // threads, without -> with: operands in memory 0.74 / 0.70 / 0.76 -> 0.99 /
  // 0.97 / 0.81; in its 300 MB last-level cache 0.89 / 0.85 / 0.98 -> 0.95 /
  // 0.90 / 0.99 and 0.85 / 0.89 / 1.07 -> 0.83 / 0.90 / 1.06. The row ahead is
  // at most one position on, found without dividing: a first version that
  // located it with integer divisions per row read 0.67-0.80 at 1 and 4
  // threads in the cache.
  // 1 and 4 KiB ahead were no better than 2.
  const int64_t ahead_rows = std::min<int64_t>(a.heads, std::max<int64_t>(1, 2048 / (d * int64_t(sizeof(T)))));
  float* cf = cs.data();
  float* sf = cs.data() + d;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t b = p / a.seq, s = p % a.seq;
    const T* x_pos = at<T>(a.x, b * a.x_stride[0] + s * a.x_stride[1]);
    // Position p + 1's rows (the next batch's first after the last s), where
    // this task goes on to it.
    const T* x_next = p + 1 >= p1 ? nullptr
                      : s + 1 < a.seq ? x_pos + a.x_stride[1]
                                      : at<T>(a.x, (b + 1) * a.x_stride[0]);
    const C* cp = at<C>(a.cos, b * a.cs_batch_stride + s * a.cs_seq_stride);
    const C* sp = at<C>(a.sin, b * a.cs_batch_stride + s * a.cs_seq_stride);
    if (a.interleaved) {
      // out = x * cos_dup + swap_pairs(x) * (-sin, +sin, ...)
      for (int64_t i = 0; i < half; ++i) {
        const float c = to_float(cp[i]), sn = sign * to_float(sp[i]);
        cf[2 * i] = c; cf[2 * i + 1] = c;
        sf[2 * i] = -sn; sf[2 * i + 1] = sn;
      }
    } else {
      // In the lanes' order of Chunk<T> (chunk_floats), vectorised: per
      // position this is 1/heads of the work.
      chunk_floats_for<T>(cp, cf, half);
      chunk_floats_for<T>(sp, sf, half);
      if (a.inverse) {
        for (int64_t i = 0; i < half; ++i) sf[i] = -sf[i];
      }
    }
    for (int64_t h = 0; h < a.heads; ++h) {
      const T* x = x_pos + h * a.x_stride[2];
      T* out = at<T>(a.out, b * a.out_stride[0] + s * a.out_stride[1] + h * a.out_stride[2]);
      // The row ahead_rows later in (position, head) order, within this task.
      const int64_t later = h + ahead_rows;
      const T* ahead = later < a.heads    ? x_pos + later * a.x_stride[2]
                       : x_next != nullptr ? x_next + (later - a.heads) * a.x_stride[2]
                                           : nullptr;

      // Pairs must not straddle vectors, so there is no scalar head: rows that
      // do not start on a vector boundary use ordinary stores.
      const bool st = stream && (a.interleaved ? vector_aligned(out)
                                               : Chunk<T>::aligned(out) && Chunk<T>::aligned(out + half));
      int64_t i = 0;
      if (a.interleaved) {
        for (; i + W <= d; i += W) {
          if (ahead != nullptr) prefetch_lines(ahead + i, W * sizeof(T));
          Vec xv = Vec::load(x + i);
          put(Vec::fmadd(xv.swap_pairs(), Vec::load(sf + i), xv * Vec::load(cf + i)), out + i, st);
        }
        for (; i < d; i += 2) {
          const float x0 = to_float(x[i]), x1 = to_float(x[i + 1]);
          out[i] = from_float<T>(x0 * cf[i] + x1 * sf[i]);
          out[i + 1] = from_float<T>(x1 * cf[i + 1] + x0 * sf[i + 1]);
        }
      } else {
        // A chunk of each half at a time (Chunk<T>: for bfloat16 at the
        // AVX-512 levels even and odd lanes, cos and sin in the same order).
        using Ch = Chunk<T>;
        for (; i + Ch::kSize <= half; i += Ch::kSize) {
          Vec x1a, x1b, x2a, x2b;
          if (ahead != nullptr) {
            prefetch_lines(ahead + i, Ch::kSize * sizeof(T));
            prefetch_lines(ahead + half + i, Ch::kSize * sizeof(T));
          }
          Ch::load(x + i, x1a, x1b);
          Ch::load(x + half + i, x2a, x2b);
          const Vec ca = Vec::load(cf + i), cb = Vec::load(cf + i + W);
          const Vec sa = Vec::load(sf + i), sb = Vec::load(sf + i + W);
          Ch::store(out + i, x1a * ca - x2a * sa, x1b * cb - x2b * sb, st);
          Ch::store(out + half + i, Vec::fmadd(x1a, sa, x2a * ca), Vec::fmadd(x1b, sb, x2b * cb), st);
        }
        for (; i < half; ++i) {
          const float x1 = to_float(x[i]), x2 = to_float(x[half + i]);
          out[i] = from_float<T>(x1 * cf[i] - x2 * sf[i]);
          out[half + i] = from_float<T>(x2 * cf[i] + x1 * sf[i]);
        }
      }
    }
  }
}

void rope(const kpdrRopeArgs& a) {
  with_dtype(a.dtype, [&](auto t) {
    with_dtype(a.cs_dtype, [&](auto c) {
      using T = decltype(t);
      using C = decltype(c);
      const bool stream = use_streaming_stores(a.batch * a.seq * a.heads * a.head_dim * int64_t(sizeof(T)));
      kp::parallel_for(0, a.batch * a.seq, grain_for(a.heads * a.head_dim), [&](int64_t b, int64_t e) {
        rope_positions<T, C>(a, b, e, stream);
        if (stream) Vec::fence();
      });
    });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
