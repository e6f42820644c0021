// rms_norm and fused_add_rms_norm (one pass: x (+ residual) is read once, the
// row stays in registers between the sum of squares and the scaling), and the
// rms_norm backward.
//
// Launch configuration: a group of `threads` threads (a multiple of 32) per
// row, `split` rows per block; each thread keeps up to 8 16-byte vectors of
// its row in registers (rows longer than 8 * threads vectors are re-read).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/row_launch.cuh"

namespace kp::cuda {
namespace {


template <typename T, int VEC, int VPT, bool kResidual>
__global__ void rms_norm_kernel(kpdrRmsNormArgs a, int group) {
  __shared__ float scratch[32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / group) + threadIdx.x / group;
  const int tid = threadIdx.x % group;
  const bool active = row < a.rows;
  const int64_t nvec = a.cols / VEC;
  const T* x = static_cast<const T*>(a.x) + row * a.x_row_stride;
  const T* r = kResidual ? static_cast<const T*>(a.residual) + row * a.residual_row_stride : nullptr;
  T* ro = kResidual ? static_cast<T*>(a.residual_out) + row * a.residual_out_row_stride : nullptr;
  T* out = static_cast<T*>(a.out) + row * a.out_row_stride;
  const T* w = static_cast<const T*>(a.weight);

  // s = x (+ residual, rounded to T as the unfused code does), as floats.
  auto load_sum = [&](int64_t j, float (&v)[VEC]) {
    const Vec<T, VEC> xv = load_vec<T, VEC>(x + j * VEC);
    if constexpr (kResidual) {
      const Vec<T, VEC> rv = load_vec<T, VEC>(r + j * VEC);
      Vec<T, VEC> s;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        s.v[e] = from_f<T>(to_f(xv.v[e]) + to_f(rv.v[e]));
        v[e] = to_f(s.v[e]);
      }
      store_vec<T, VEC>(ro + j * VEC, s);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] = to_f(xv.v[e]);
    }
  };
  auto store_scaled = [&](int64_t j, const float (&v)[VEC], float inv) {
    const Vec<T, VEC> wv = load_vec<T, VEC>(w + j * VEC);
    Vec<T, VEC> o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(v[e] * inv * to_f(wv.v[e]));
    store_vec<T, VEC>(out + j * VEC, o);
  };

  float sumsq = 0.f;
  if constexpr (VPT > 0) {
    float v[VPT][VEC];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * group + tid;
      if (active && j < nvec) {
        load_sum(j, v[i]);
#pragma unroll
        for (int e = 0; e < VEC; ++e) sumsq += v[i][e] * v[i][e];
      }
    }
    const float inv = rsqrtf(group_reduce<false>(sumsq, group, scratch) / a.cols + a.eps);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * group + tid;
      if (active && j < nvec) store_scaled(j, v[i], inv);
    }
  } else {
    float v[VEC];
    for (int64_t j = tid; active && j < nvec; j += group) {
      load_sum(j, v);
#pragma unroll
      for (int e = 0; e < VEC; ++e) sumsq += v[e] * v[e];
    }
    const float inv = rsqrtf(group_reduce<false>(sumsq, group, scratch) / a.cols + a.eps);
    // Second read of the row (from cache for all but the longest rows); this
    // thread re-reads what it wrote to residual_out itself.
    const T* s = kResidual ? ro : x;
    for (int64_t j = tid; active && j < nvec; j += group) {
      const Vec<T, VEC> sv = load_vec<T, VEC>(s + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] = to_f(sv.v[e]);
      store_scaled(j, v, inv);
    }
  }
}

template <typename T>
int vec_width(const kpdrRmsNormArgs& a) {
  constexpr int V = kVec16<T>;
  bool ok = a.cols % V == 0 && a.x_row_stride % V == 0 && a.out_row_stride % V == 0 &&
            aligned(a.x, 16) && aligned(a.out, 16) && aligned(a.weight, 16);
  if (a.residual != nullptr) {
    ok = ok && a.residual_row_stride % V == 0 && a.residual_out_row_stride % V == 0 &&
         aligned(a.residual, 16) && aligned(a.residual_out, 16);
  }
  return ok ? V : 1;
}

bool valid_group(int g) { return g >= 32 && g <= 1024 && g % 32 == 0; }

// Whether a block of `threads` can launch this instantiation: rows kept in
// registers need many per thread, which 1024-thread blocks may not have.
template <typename T, int VEC, int VPT, bool kResidual>
bool fits(int threads) {
  static const int max_threads = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, rms_norm_kernel<T, VEC, VPT, kResidual>) != cudaSuccess) {
      cudaGetLastError();
      return 1024;
    }
    return attr.maxThreadsPerBlock;
  }();
  return threads <= max_threads;
}

template <typename T, int VEC, bool kResidual>
cudaError_t launch_vpt(const kpdrRmsNormArgs& a, int group, int rows_per_block, cudaStream_t stream) {
  const int64_t vpt = ceil_div(a.cols / VEC, group);
  const dim3 grid(static_cast<unsigned>(ceil_div(a.rows, rows_per_block)));
  const int block = group * rows_per_block;
  // The smallest register-resident variant that holds the row and fits the
  // block; else the variant that re-reads the row.
  if (vpt <= 1 && fits<T, VEC, 1, kResidual>(block)) rms_norm_kernel<T, VEC, 1, kResidual><<<grid, block, 0, stream>>>(a, group);
  else if (vpt <= 2 && fits<T, VEC, 2, kResidual>(block)) rms_norm_kernel<T, VEC, 2, kResidual><<<grid, block, 0, stream>>>(a, group);
  else if (vpt <= 4 && fits<T, VEC, 4, kResidual>(block)) rms_norm_kernel<T, VEC, 4, kResidual><<<grid, block, 0, stream>>>(a, group);
  else if (vpt <= kRowMaxVpt && fits<T, VEC, 8, kResidual>(block)) rms_norm_kernel<T, VEC, 8, kResidual><<<grid, block, 0, stream>>>(a, group);
  else rms_norm_kernel<T, VEC, 0, kResidual><<<grid, block, 0, stream>>>(a, group);
  return cudaGetLastError();
}

// ------------------------------------------------------------------ backward

template <typename T, int VEC>
__global__ void rms_norm_backward_kernel(RmsNormBackwardArgs a) {
  __shared__ float scratch[32];
  const int64_t nvec = a.cols / VEC;
  const T* w = static_cast<const T*>(a.weight);
  float* dw = a.dw_partial + static_cast<int64_t>(blockIdx.x) * a.cols;
  for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) dw[j * VEC + e] = 0.f;
  }
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const T* g = static_cast<const T*>(a.grad) + row * a.cols;
    const T* x = static_cast<const T*>(a.x) + row * a.cols;
    T* dx = static_cast<T*>(a.dx) + row * a.cols;
    float sumsq = 0.f, dot = 0.f;
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      const auto gv = load_vec<T, VEC>(g + j * VEC), xv = load_vec<T, VEC>(x + j * VEC);
      const auto wv = load_vec<T, VEC>(w + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float xf = to_f(xv.v[e]);
        sumsq += xf * xf;
        dot += to_f(gv.v[e]) * to_f(wv.v[e]) * xf;
      }
    }
    sumsq = group_reduce<false>(sumsq, blockDim.x, scratch);
    dot = group_reduce<false>(dot, blockDim.x, scratch);
    const float inv = rsqrtf(sumsq / a.cols + a.eps);
    const float c = inv * inv * dot / a.cols;
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      const auto gv = load_vec<T, VEC>(g + j * VEC), xv = load_vec<T, VEC>(x + j * VEC);
      const auto wv = load_vec<T, VEC>(w + j * VEC);
      Vec<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float xf = to_f(xv.v[e]), gf = to_f(gv.v[e]);
        o.v[e] = from_f<T>(inv * (gf * to_f(wv.v[e]) - xf * c));
        dw[j * VEC + e] += gf * xf * inv;  // this thread owns these columns
      }
      store_vec<T, VEC>(dx + j * VEC, o);
    }
  }
}

}  // namespace

ConfigList rms_norm_candidates(const kpdrRmsNormArgs& a) {
  const int64_t nvec = std::max<int64_t>(1, a.cols / 8);  // bf16/fp16 width; close enough for f32
  return row_candidates(nvec);
}

cudaError_t rms_norm(const kpdrRmsNormArgs& a, LaunchConfig cfg, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cudaSuccess;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int vec = vec_width<T>(a);
    LaunchConfig c = row_default_config(a.cols / vec);
    if (valid_group(cfg.threads) && cfg.split >= 1 && cfg.threads * cfg.split <= 1024) c = cfg;
    const bool residual = a.residual != nullptr;
    if (vec == kVec16<T>) {
      return residual ? launch_vpt<T, kVec16<T>, true>(a, c.threads, c.split, stream)
                      : launch_vpt<T, kVec16<T>, false>(a, c.threads, c.split, stream);
    }
    return residual ? launch_vpt<T, 1, true>(a, c.threads, c.split, stream)
                    : launch_vpt<T, 1, false>(a, c.threads, c.split, stream);
  });
}

int rms_norm_backward_blocks(const RmsNormBackwardArgs& a) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(a.rows, 2 * sm_count())));
}

cudaError_t rms_norm_backward(const RmsNormBackwardArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cudaSuccess;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = a.cols % V == 0 && aligned(a.grad, 16) && aligned(a.x, 16) &&
                     aligned(a.weight, 16) && aligned(a.dx, 16);
    const int threads = round_up_pow2(ceil_div(a.cols / (vec ? V : 1), 2), 32, 512);
    const int blocks = rms_norm_backward_blocks(a);
    if (vec) rms_norm_backward_kernel<T, V><<<blocks, threads, 0, stream>>>(a);
    else rms_norm_backward_kernel<T, 1><<<blocks, threads, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace kp::cuda
