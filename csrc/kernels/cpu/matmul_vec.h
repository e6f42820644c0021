// matmul_vec: w @ x for one vector x (the decode-time projection).
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

template <typename T>
void matmul_vec_rows(const kpdrMatmulVecArgs& a, const float* x, int64_t r0, int64_t r1) {
  const int64_t k = a.k;
  T* out = static_cast<T*>(a.out);
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const T* w0 = at<T>(a.w, r * a.w_row_stride);
    const T* w1 = w0 + a.w_row_stride;
    const T* w2 = w1 + a.w_row_stride;
    const T* w3 = w2 + a.w_row_stride;
    Vec acc0 = Vec::zero(), acc1 = Vec::zero(), acc2 = Vec::zero(), acc3 = Vec::zero();
    int64_t i = 0;
    for (; i + W <= k; i += W) {
      Vec xv = Vec::load(x + i);
      acc0 = Vec::fmadd(Vec::load(w0 + i), xv, acc0);
      acc1 = Vec::fmadd(Vec::load(w1 + i), xv, acc1);
      acc2 = Vec::fmadd(Vec::load(w2 + i), xv, acc2);
      acc3 = Vec::fmadd(Vec::load(w3 + i), xv, acc3);
    }
    float s0 = acc0.reduce_add(), s1 = acc1.reduce_add(), s2 = acc2.reduce_add(), s3 = acc3.reduce_add();
    for (; i < k; ++i) {
      s0 += to_float(w0[i]) * x[i]; s1 += to_float(w1[i]) * x[i];
      s2 += to_float(w2[i]) * x[i]; s3 += to_float(w3[i]) * x[i];
    }
    out[r] = from_float<T>(s0); out[r + 1] = from_float<T>(s1);
    out[r + 2] = from_float<T>(s2); out[r + 3] = from_float<T>(s3);
  }
  for (; r < r1; ++r) {
    const T* wr = at<T>(a.w, r * a.w_row_stride);
    Vec acc = Vec::zero();
    int64_t i = 0;
    for (; i + W <= k; i += W) acc = Vec::fmadd(Vec::load(wr + i), Vec::load(x + i), acc);
    float s = acc.reduce_add();
    for (; i < k; ++i) s += to_float(wr[i]) * x[i];
    out[r] = from_float<T>(s);
  }
}

void matmul_vec(const kpdrMatmulVecArgs& a) {
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    std::vector<float> x(a.k);
    to_floats(static_cast<const T*>(a.x), x.data(), a.k);
    kp::parallel_for(0, a.n, std::max<int64_t>(4, 8192 / std::max<int64_t>(1, a.k)) ,
                     [&](int64_t b, int64_t e) { matmul_vec_rows<T>(a, x.data(), b, e); });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
