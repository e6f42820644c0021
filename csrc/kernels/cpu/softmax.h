// softmax over the last dimension of rows.
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

template <typename T>
void softmax_rows(const kpdrSoftmaxArgs& a, int64_t r0, int64_t r1, bool stream) {
  const int64_t n = a.cols;
  std::vector<float> buf(n);
  for (int64_t r = r0; r < r1; ++r) {
    const T* x = at<T>(a.x, r * a.x_row_stride);
    T* out = at<T>(a.out, r * a.out_row_stride);
    float* e = buf.data();
    int64_t i = 0;
    Vec vmax = Vec::set1(-std::numeric_limits<float>::infinity());
    for (; i + W <= n; i += W) vmax = Vec::max(vmax, Vec::load(x + i));
    float m = vmax.reduce_max();
    for (; i < n; ++i) m = std::max(m, to_float(x[i]));
    if (std::isinf(m) && m < 0) m = 0.f;  // all -inf: exp gives 0s, then 0/0 = nan like torch
    const Vec vm = Vec::set1(m);
    Vec vsum = Vec::zero();
    for (i = 0; i + W <= n; i += W) {
      Vec ev = vexp(Vec::load(x + i) - vm);
      ev.store(e + i);
      vsum = vsum + ev;
    }
    float sum = vsum.reduce_add();
    for (; i < n; ++i) { e[i] = sexp(to_float(x[i]) - m); sum += e[i]; }
    const float inv = 1.f / sum;
    const Vec vinv = Vec::set1(inv);
    write_span(out, 0, n, stream, [&](int64_t j) { return Vec::load(e + j) * vinv; },
               [&](int64_t j) { return e[j] * inv; });
  }
  if (stream) Vec::fence();
}

void softmax(const kpdrSoftmaxArgs& a) {
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    const bool stream = use_streaming_stores(a.rows * a.cols * int64_t(sizeof(T)));
    kp::parallel_for(0, a.rows, grain_for(a.cols), [&](int64_t b, int64_t e) { softmax_rows<T>(a, b, e, stream); });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
