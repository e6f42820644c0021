// silu, silu_and_mul (SwiGLU) and the silu_and_mul backward: elementwise,
// 16-byte vectors, one read and one write of every element.
//
// Launch configuration: `threads` per block, `split` vectors per thread
// (unrolled, each a block-stride apart so the accesses stay coalesced);
// blocks cover a row's vectors along x and rows along y.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

namespace kp::cuda {
namespace {

constexpr int kMaxRowsY = 65535;

template <typename T, int VEC, int U, bool kGated>
__global__ void silu_kernel(kpdrSiluArgs a) {
  const int64_t nvec = a.cols / VEC;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x * U + threadIdx.x;
  for (int64_t row = blockIdx.y; row < a.rows; row += gridDim.y) {
    const T* x = static_cast<const T*>(a.x) + row * a.x_row_stride;
    T* out = static_cast<T*>(a.out) + row * a.out_row_stride;
    Vec<T, VEC> g[U], u[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {  // all loads first: more bytes in flight
      const int64_t j = base + static_cast<int64_t>(k) * blockDim.x;
      if (j < nvec) {
        g[k] = load_vec<T, VEC>(x + j * VEC);
        if constexpr (kGated) u[k] = load_vec<T, VEC>(x + a.cols + j * VEC);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t j = base + static_cast<int64_t>(k) * blockDim.x;
      if (j < nvec) {
        Vec<T, VEC> o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          float v = silu_f(to_f(g[k].v[e]));
          if constexpr (kGated) v *= to_f(u[k].v[e]);
          o.v[e] = from_f<T>(v);
        }
        store_vec<T, VEC>(out + j * VEC, o);
      }
    }
  }
}

template <typename T, int VEC, int U>
cudaError_t launch(const kpdrSiluArgs& a, int threads, cudaStream_t stream) {
  const int64_t nvec = a.cols / VEC;
  const dim3 grid(static_cast<unsigned>(ceil_div(nvec, static_cast<int64_t>(threads) * U)),
                  static_cast<unsigned>(std::min<int64_t>(a.rows, kMaxRowsY)));
  if (a.gated) silu_kernel<T, VEC, U, true><<<grid, threads, 0, stream>>>(a);
  else silu_kernel<T, VEC, U, false><<<grid, threads, 0, stream>>>(a);
  return cudaGetLastError();
}

// Whether a block of `threads` can launch this instantiation (its registers
// per thread times the block must fit the SM).
template <typename T, int VEC, int U, bool kGated>
bool fits(int threads) {
  static const int max_threads = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, silu_kernel<T, VEC, U, kGated>) != cudaSuccess) {
      cudaGetLastError();
      return 1024;
    }
    return attr.maxThreadsPerBlock;
  }();
  return threads <= max_threads;
}

template <typename T, int VEC, int U>
bool fits_either(const kpdrSiluArgs& a, int threads) {
  return a.gated ? fits<T, VEC, U, true>(threads) : fits<T, VEC, U, false>(threads);
}

// The requested unroll, or a smaller one where the block would not fit.
template <typename T, int VEC>
cudaError_t launch_unroll(const kpdrSiluArgs& a, LaunchConfig c, cudaStream_t stream) {
  if (c.split == 4 && fits_either<T, VEC, 4>(a, c.threads)) return launch<T, VEC, 4>(a, c.threads, stream);
  if (c.split != 1 && fits_either<T, VEC, 2>(a, c.threads)) return launch<T, VEC, 2>(a, c.threads, stream);
  return launch<T, VEC, 1>(a, c.threads, stream);
}

template <typename T, int VEC>
__global__ void silu_and_mul_backward_kernel(SiluAndMulBackwardArgs a) {
  const int64_t nvec = a.cols / VEC;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= nvec) return;
  for (int64_t row = blockIdx.y; row < a.rows; row += gridDim.y) {
    const T* g = static_cast<const T*>(a.grad) + row * a.cols;
    const T* x = static_cast<const T*>(a.x) + row * 2 * a.cols;
    T* dx = static_cast<T*>(a.dx) + row * 2 * a.cols;
    const auto gv = load_vec<T, VEC>(g + j * VEC);
    const auto xg = load_vec<T, VEC>(x + j * VEC), xu = load_vec<T, VEC>(x + a.cols + j * VEC);
    Vec<T, VEC> dg, du;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float gate = to_f(xg.v[e]), gf = to_f(gv.v[e]);
      const float sig = 1.f / (1.f + __expf(-gate));
      dg.v[e] = from_f<T>(gf * to_f(xu.v[e]) * sig * (1.f + gate * (1.f - sig)));
      du.v[e] = from_f<T>(gf * gate * sig);
    }
    store_vec<T, VEC>(dx + j * VEC, dg);
    store_vec<T, VEC>(dx + a.cols + j * VEC, du);
  }
}

}  // namespace

ConfigList silu_candidates(const kpdrSiluArgs&) {
  ConfigList list;
  list.add(256, 2);
  for (int t : {128, 256, 512, 1024}) {
    for (int u : {1, 2, 4}) {
      if (!(t == 256 && u == 2)) list.add(t, u);
    }
  }
  return list;
}

cudaError_t silu(const kpdrSiluArgs& a, LaunchConfig cfg, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cudaSuccess;
  LaunchConfig c{256, 2};
  if (cfg.threads >= 32 && cfg.threads <= 1024 && cfg.threads % 32 == 0) c.threads = cfg.threads;
  if (cfg.split == 1 || cfg.split == 2 || cfg.split == 4) c.split = cfg.split;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = a.cols % V == 0 && a.x_row_stride % V == 0 && a.out_row_stride % V == 0 &&
                     aligned(a.x, 16) && aligned(a.out, 16);
    return vec ? launch_unroll<T, V>(a, c, stream) : launch_unroll<T, 1>(a, c, stream);
  });
}

cudaError_t silu_and_mul_backward(const SiluAndMulBackwardArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cudaSuccess;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = a.cols % V == 0 && aligned(a.grad, 16) && aligned(a.x, 16) && aligned(a.dx, 16);
    const int vw = vec ? V : 1;
    const int threads = 256;
    const dim3 grid(static_cast<unsigned>(ceil_div(a.cols / vw, threads)),
                    static_cast<unsigned>(std::min<int64_t>(a.rows, kMaxRowsY)));
    if (vec) silu_and_mul_backward_kernel<T, V><<<grid, threads, 0, stream>>>(a);
    else silu_and_mul_backward_kernel<T, 1><<<grid, threads, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace kp::cuda
