// matmul_vec: out[n] = w[n, :] . x, the memory-bound decode-time linear layer.
//
// Launch configuration: `threads` per block, `split` rows per warp. A warp
// walks its rows together with 16-byte loads, four chunks of 32 vectors at a
// time, so each lane has split * 4 loads of w in flight; x is read through
// L1 (every warp reads all of it).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

namespace kp::cuda {
namespace {

constexpr int kChunks = 4;

template <typename T, int VEC, int R>
__global__ void matmul_vec_kernel(kpdrMatmulVecArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int64_t row0 = warp * R;
  if (row0 >= a.n) return;
  const T* x = static_cast<const T*>(a.x);
  const T* w[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = row0 + r < a.n ? row0 + r : a.n - 1;  // clamped rows are computed, not stored
    w[r] = static_cast<const T*>(a.w) + row * a.w_row_stride;
  }
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  const int64_t nvec = a.k / VEC;
  constexpr int kStep = 32 * kChunks;
  int64_t j0 = 0;
  for (; j0 + kStep <= nvec; j0 += kStep) {
    Vec<T, VEC> wv[R][kChunks], xv[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int64_t j = j0 + c * 32 + lane;
      xv[c] = load_vec<T, VEC>(x + j * VEC);
#pragma unroll
      for (int r = 0; r < R; ++r) wv[r][c] = load_vec<T, VEC>(w[r] + j * VEC);
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float xf = to_f(xv[c].v[e]);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] += to_f(wv[r][c].v[e]) * xf;
      }
  }
  for (int64_t j = j0 + lane; j < nvec; j += 32) {
    const auto xv = load_vec<T, VEC>(x + j * VEC);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const auto wv = load_vec<T, VEC>(w[r] + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[r] += to_f(wv.v[e]) * to_f(xv.v[e]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0 && row0 + r < a.n) static_cast<T*>(a.out)[row0 + r] = from_f<T>(s);
  }
}

template <typename T, int VEC>
cudaError_t launch(const kpdrMatmulVecArgs& a, int threads, int rows_per_warp, cudaStream_t stream) {
  const int64_t rows_per_block = static_cast<int64_t>(threads / 32) * rows_per_warp;
  const unsigned grid = static_cast<unsigned>(ceil_div(a.n, rows_per_block));
  switch (rows_per_warp) {
    case 1: matmul_vec_kernel<T, VEC, 1><<<grid, threads, 0, stream>>>(a); break;
    case 4: matmul_vec_kernel<T, VEC, 4><<<grid, threads, 0, stream>>>(a); break;
    default: matmul_vec_kernel<T, VEC, 2><<<grid, threads, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

}  // namespace

ConfigList matmul_vec_candidates(const kpdrMatmulVecArgs&) {
  ConfigList list;
  list.add(128, 2);
  for (int t : {128, 256, 512}) {
    for (int r : {1, 2, 4}) {
      if (!(t == 128 && r == 2)) list.add(t, r);
    }
  }
  return list;
}

cudaError_t matmul_vec(const kpdrMatmulVecArgs& a, LaunchConfig cfg, cudaStream_t stream) {
  if (a.n <= 0 || a.k <= 0) return cudaSuccess;
  const int threads = (cfg.threads >= 32 && cfg.threads <= 1024 && cfg.threads % 32 == 0) ? cfg.threads : 128;
  const int rows = (cfg.split == 1 || cfg.split == 2 || cfg.split == 4) ? cfg.split : 2;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = a.k % V == 0 && a.w_row_stride % V == 0 && aligned(a.w, 16) && aligned(a.x, 16);
    return vec ? launch<T, V>(a, threads, rows, stream) : launch<T, 1>(a, threads, rows, stream);
  });
}

}  // namespace kp::cuda
