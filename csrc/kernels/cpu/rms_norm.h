// rms_norm and fused_add_rms_norm (a residual given): each row is summed (its
// squares) and then normalised, out = x * rstd * weight.
//
// The two passes over a row are software-pipelined: the loop that normalises
// row r also sums row r + 1. As two passes, the second (row r from L1, no
// load from memory) left the memory idle for as long as the arithmetic took,
// and one core's time was memory time plus arithmetic time; in one loop the
// next row's loads are in flight while this row is computed. The weight is
// converted to float once per call, in the lanes' order (chunk_floats).
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

template <typename T>
void rms_norm_rows(const kpdrRmsNormArgs& a, const float* wf, int64_t r0, int64_t r1, bool stream) {
  using C = Chunk<T>;
  const int64_t n = a.cols, nv = n - n % C::kSize;
  const T* w = static_cast<const T*>(a.weight);
  const bool fused = a.residual != nullptr;
  // fused_add_rms_norm with streaming stores: residual_out goes past the
  // cache, so the rounded sums x + residual of this row and the next are kept
  // here for the normalising loop, and copied out after it.
  std::vector<T> keep(fused && stream ? 2 * n : 0);
  auto x_row = [&](int64_t r) { return at<T>(a.x, r * a.x_row_stride); };
  auto res_row = [&](int64_t r) { return at<T>(a.residual, r * a.residual_row_stride); };
  // Where row r's rounded sums go: what the normalising loop reads (fused).
  auto sum_row = [&](int64_t r) -> T* {
    return stream ? keep.data() + (r & 1) * n : at<T>(a.residual_out, r * a.residual_out_row_stride);
  };
  // Accumulates the squares of row r's chunk at i; fused, x + residual is
  // first rounded to T and stored, and the rounded values are summed, exactly
  // as x + residual followed by rms_norm computes.
  auto sum_chunk = [&](int64_t r, int64_t i, Vec& s0, Vec& s1) {
    Vec v0, v1;
    C::load(x_row(r) + i, v0, v1);
    if (fused) {
      Vec r0v, r1v;
      C::load(res_row(r) + i, r0v, r1v);
      v0 = v0 + r0v;
      v1 = v1 + r1v;
      T* dst = sum_row(r) + i;
      C::store(dst, v0, v1, false);
      if constexpr (!std::is_same_v<T, float>) C::load(dst, v0, v1);  // the rounded values, forwarded from the store
    }
    s0 = Vec::fmadd(v0, v0, s0);
    s1 = Vec::fmadd(v1, v1, s1);
  };
  auto sum_scalar = [&](int64_t r, int64_t i) {
    float v = to_float(x_row(r)[i]);
    if (fused) {
      T* dst = sum_row(r) + i;
      *dst = from_float<T>(v + to_float(res_row(r)[i]));
      v = to_float(*dst);
    }
    return v * v;
  };
  // The row normalised: x, or the rounded sums.
  auto src_row = [&](int64_t r) -> const T* { return fused ? sum_row(r) : x_row(r); };
  auto whole_sum = [&](int64_t r) {
    Vec s0 = Vec::zero(), s1 = Vec::zero();
    for (int64_t i = 0; i < nv; i += C::kSize) sum_chunk(r, i, s0, s1);
    float ss = 0.f;
    for (int64_t i = nv; i < n; ++i) ss += sum_scalar(r, i);
    return ss + (s0 + s1).reduce_add();
  };

  float ss = whole_sum(r0);
  for (int64_t r = r0; r < r1; ++r) {
    const float inv = 1.f / std::sqrt(ss / float(n) + a.eps);
    if (a.rstd != nullptr) static_cast<float*>(a.rstd)[r] = inv;
    const Vec vinv = Vec::set1(inv);
    const T* src = src_row(r);
    T* out = at<T>(a.out, r * a.out_row_stride);
    // Rows that do not start on a streaming boundary use ordinary stores
    // (the lanes' order ties chunks to the weight's, so no scalar head).
    const bool st = stream && C::aligned(out);
    auto normalise_chunk = [&](int64_t i) {
      Vec v0, v1;
      C::load(src + i, v0, v1);
      C::store(out + i, v0 * vinv * Vec::load(wf + i), v1 * vinv * Vec::load(wf + i + W), st);
    };
    const bool next = r + 1 < r1;
    Vec s0 = Vec::zero(), s1 = Vec::zero();
    if (next) {
      // Row r + 2 is asked for into L2 meanwhile, a row ahead of its loads:
      // this loop's arithmetic fills the out-of-order window, so its own
      // loads keep too few lines in flight for one core to reach a copy's
      // bandwidth (one thread: 0.67 -> 0.85 of a copy on the development
      // machine).
      const T* px = x_row(std::min(r + 2, r1 - 1));
      const T* pr = fused ? res_row(std::min(r + 2, r1 - 1)) : nullptr;
      for (int64_t i = 0; i < nv; i += C::kSize) {
        prefetch_lines(px + i, C::kSize * sizeof(T));
        if (fused) prefetch_lines(pr + i, C::kSize * sizeof(T));
        sum_chunk(r + 1, i, s0, s1);
        normalise_chunk(i);
      }
    } else {
      for (int64_t i = 0; i < nv; i += C::kSize) normalise_chunk(i);
    }
    float tail = 0.f;
    for (int64_t i = nv; i < n; ++i) {
      out[i] = from_float<T>(to_float(src[i]) * inv * to_float(w[i]));
      if (next) tail += sum_scalar(r + 1, i);
    }
    if (next) ss = tail + (s0 + s1).reduce_add();
    if (fused && stream) copy_elements(at<T>(a.residual_out, r * a.residual_out_row_stride), src, n, true);
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
    kp::parallel_for(0, a.rows, grain_for(a.cols), [&](int64_t b, int64_t e) { rms_norm_rows<T>(a, wf, b, e, stream); });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
