// rms_norm and fused_add_rms_norm (a residual given): each row is summed (its
// squares) and then normalised, out = x * rstd * weight.
//
// rms_norm's two passes over a row are software-pipelined where two rows fit
// L1: the loop that normalises row r also sums row r + 1. As two passes, the second
// (row r from L1, no load from memory) left the memory idle for as long as
// the arithmetic took, and one core's time was memory time plus arithmetic
// time; in one loop the next row's loads are in flight while this row is
// computed. The weight is converted to float once per call, in the lanes'
// order (chunk_floats). The loops take plain pointers (no lambda captures:
// the compiler reloaded every captured variable after each store).
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

// s0, s1 += the squares of the chunk of x at i (kFused: of the sums x +
// residual, rounded to T and stored at sums + i, which is what x + residual
// followed by rms_norm computes).
template <typename T, bool kFused>
inline void rms_sum_chunk(const T* x, const T* res, T* sums, int64_t i, Vec& s0, Vec& s1) {
  using C = Chunk<T>;
  if constexpr (!kFused) {
    C::sum_squares(x + i, s0, s1);
  } else {
    Vec v0, v1, r0, r1;
    C::load(x + i, v0, v1);
    C::load(res + i, r0, r1);
    C::store_and_sum_squares(sums + i, v0 + r0, v1 + r1, s0, s1);
  }
}

// The sum of squares of a row (fused: of x + residual, stored rounded at
// sums; with copy_to, each whole chunk of sums is also streamed there as it
// is made, copy_to being 64-byte aligned).
template <typename T, bool kFused>
float rms_row_sum(const T* x, const T* res, T* sums, int64_t n, T* copy_to = nullptr) {
  using C = Chunk<T>;
  const int64_t nv = n - n % C::kSize;
  Vec s0 = Vec::zero(), s1 = Vec::zero();
  if (kFused && copy_to != nullptr) {
    for (int64_t i = 0; i < nv; i += C::kSize) {
      rms_sum_chunk<T, kFused>(x, res, sums, i, s0, s1);
      stream_bytes(copy_to + i, sums + i, C::kSize * sizeof(T));
    }
  } else {
    for (int64_t i = 0; i < nv; i += C::kSize) rms_sum_chunk<T, kFused>(x, res, sums, i, s0, s1);
  }
  float ss = 0.f;
  for (int64_t i = nv; i < n; ++i) {
    float v = to_float(x[i]);
    if constexpr (kFused) {
      sums[i] = from_float<T>(v + to_float(res[i]));
      v = to_float(sums[i]);
    }
    ss += v * v;
  }
  if (kFused && copy_to != nullptr) std::memcpy(copy_to + nv, sums + nv, (n - nv) * sizeof(T));
  return ss + (s0 + s1).reduce_add();
}

// out = src * inv * weight over the row's whole chunks. kNext: also sums the
// next row's chunks (rms_sum_chunk) into s0, s1; kPrefetch: asks for the
// lines of `ahead` into L2 (prefetch_lines) as it goes.
//
// Each chunk of src is loaded first and out stored last: a load issued after
// a store to the same address modulo 4 KiB waits for it (the CPU compares the
// low 12 address bits first), and rows of 4096 elements put row r and row
// r + 1 at the same offsets: summing and storing the next row's chunk
// between this load and this store made a pipelined float32
// fused_add_rms_norm 1.5x slower.
template <typename T, bool kNext, bool kPrefetch>
void rms_normalise_row(const T* src, T* out, const float* wf, float inv, int64_t nv, bool stream,
                       const T* next_x, const T* ahead, Vec& s0, Vec& s1) {
  using C = Chunk<T>;
  const Vec vinv = Vec::set1(inv);
  for (int64_t i = 0; i < nv; i += C::kSize) {
    if constexpr (kPrefetch) prefetch_lines(ahead + i, C::kSize * sizeof(T));
    Vec v0, v1;
    C::load(src + i, v0, v1);
    if constexpr (kNext) rms_sum_chunk<T, false>(next_x, nullptr, nullptr, i, s0, s1);
    C::store(out + i, v0 * vinv * Vec::load(wf + i), v1 * vinv * Vec::load(wf + i + W), stream);
  }
}

template <typename T, bool kFused>
void rms_norm_rows(const kpdrRmsNormArgs& a, const float* wf, int64_t r0, int64_t r1, bool stream) {
  using C = Chunk<T>;
  const int64_t n = a.cols, nv = n - n % C::kSize;
  const T* w = static_cast<const T*>(a.weight);
  // fused_add_rms_norm with streaming stores: residual_out goes past the
  // cache, so the rounded sums x + residual of the row are kept here for the
  // normalising loop (and streamed out, below).
  std::vector<T> keep(kFused && stream ? n : 0);
  auto x_row = [&](int64_t r) { return at<T>(a.x, r * a.x_row_stride); };
  auto res_row = [&](int64_t r) { return kFused ? at<T>(a.residual, r * a.residual_row_stride) : nullptr; };
  // Where row r's rounded sums go (fused), which the normalising loop reads.
  auto sums_row = [&](int64_t r) -> T* {
    if (!kFused) return nullptr;
    return stream ? keep.data() : at<T>(a.residual_out, r * a.residual_out_row_stride);
  };
  auto src_row = [&](int64_t r) -> const T* { return kFused ? sums_row(r) : x_row(r); };
  // Where sum_squares flushed denormal squares (each below 2^-126), a row
  // whose sum is under n * 2^-126 * 2^24 may have lost more than float
  // rounding would: such a row is summed again in float arithmetic.
  auto checked = [&](int64_t r, float ss) {
    if (!C::kSquaresFlushTiny || !(ss < float(n) * 0x1p-102f)) return ss;
    const T* v = src_row(r);
    float exact = 0.f;
    for (int64_t i = 0; i < n; ++i) exact += to_float(v[i]) * to_float(v[i]);
    return exact;
  };
  // fused, streamed: residual_out written as the sums are made (from L1,
  // with non-temporal stores), where its rows are aligned for that;
  // otherwise copied after the row.
  auto stream_to = [&](int64_t r) -> T* {
    T* p = kFused && stream ? at<T>(a.residual_out, r * a.residual_out_row_stride) : nullptr;
    return kStreamBytes && p != nullptr && reinterpret_cast<uintptr_t>(p) % 64 == 0 ? p : nullptr;
  };
  auto row_sum = [&](int64_t r) {
    return checked(r, rms_row_sum<T, kFused>(x_row(r), res_row(r), sums_row(r), n, stream_to(r)));
  };

  // Pipelined, the loop holds rows r and r + 1 and the weight in L1; rows
  // too long for that (float32 rows of 4096 went 0.85 -> 0.67 of a copy)
  // take the two passes one after the other, and so does
  // fused_add_rms_norm (its rows and sums do not fit either: pipelined it
  // ran at 1.02 / 0.81 / 0.98 of a copy at 1 / 4 / 16 threads on the
  // 16-core Xeon, in two passes 0.88-0.97 / 0.85-1.05 / 1.02).
  const bool pipelined = !kFused && n * int64_t(2 * sizeof(T) + sizeof(float)) <= 40 * 1024;
  float ss = row_sum(r0);
  for (int64_t r = r0; r < r1; ++r) {
    if (!pipelined && r > r0) ss = row_sum(r);
    const float inv = 1.f / std::sqrt(ss / float(n) + a.eps);
    if (a.rstd != nullptr) static_cast<float*>(a.rstd)[r] = inv;
    const T* src = src_row(r);
    T* out = at<T>(a.out, r * a.out_row_stride);
    // Rows that do not start on a streaming boundary use ordinary stores
    // (the lanes' order ties chunks to the weight's, so no scalar head).
    const bool st = stream && C::aligned(out);
    const bool next = pipelined && r + 1 < r1;
    Vec s0 = Vec::zero(), s1 = Vec::zero();
    if (next) {
      // Row r + 2 is asked for into L2 meanwhile, a row ahead of its loads:
      // this loop's arithmetic fills the out-of-order window, so its own
      // loads keep too few lines in flight for one core to reach a copy's
      // bandwidth (one thread: 0.67 -> 0.85 of a copy on the development
      // machine).
      rms_normalise_row<T, true, true>(src, out, wf, inv, nv, st, x_row(r + 1), x_row(std::min(r + 2, r1 - 1)),
                                       s0, s1);
    } else {
      rms_normalise_row<T, false, false>(src, out, wf, inv, nv, st, nullptr, nullptr, s0, s1);
    }
    for (int64_t i = nv; i < n; ++i) out[i] = from_float<T>(to_float(src[i]) * inv * to_float(w[i]));
    if (next) {  // rms_norm only
      float tail = 0.f;
      const T* x = x_row(r + 1);
      for (int64_t i = nv; i < n; ++i) tail += to_float(x[i]) * to_float(x[i]);
      ss = checked(r + 1, tail + (s0 + s1).reduce_add());
    }
    if (kFused && stream && stream_to(r) == nullptr) {
      copy_elements(at<T>(a.residual_out, r * a.residual_out_row_stride), src, n, true);
    }
  }
  if (stream) Vec::fence();
}

void rms_norm(const kpdrRmsNormArgs& a) {
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    const bool stream = use_streaming_stores(a.rows * a.cols * int64_t(sizeof(T)));  // per output
    const T* w = static_cast<const T*>(a.weight);
    std::vector<float> converted;
    const float* wf = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      wf = w;  // a float chunk is in order: no conversion
    } else {
      converted.resize(a.cols);
      chunk_floats(w, converted.data(), a.cols);
      wf = converted.data();
    }
    kp::parallel_for(0, a.rows, grain_for(a.cols), [&](int64_t b, int64_t e) {
      if (a.residual != nullptr) rms_norm_rows<T, true>(a, wf, b, e, stream);
      else rms_norm_rows<T, false>(a, wf, b, e, stream);
    });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
