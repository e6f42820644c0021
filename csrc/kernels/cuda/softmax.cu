// Numerically stable softmax over the rows of a matrix.
//
// Launch configuration: a group of `threads` threads per row, `split` rows
// per block; rows of up to 8 16-byte vectors per thread stay in registers
// (one read, one write), longer rows take an online max/sum pass and a second
// read.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"
#include "kernels/cuda/row_launch.cuh"

namespace kp::cuda {
namespace {

constexpr float kNegInf = -__builtin_huge_valf();

template <typename T, int VEC, int VPT>
__global__ void softmax_kernel(kpdrSoftmaxArgs a, int group) {
  __shared__ float scratch[32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / group) + threadIdx.x / group;
  const int tid = threadIdx.x % group;
  const bool active = row < a.rows;
  const int64_t nvec = a.cols / VEC;
  const T* x = static_cast<const T*>(a.x) + row * a.x_row_stride;
  T* out = static_cast<T*>(a.out) + row * a.out_row_stride;

  if constexpr (VPT > 0) {
    float v[VPT][VEC];
    float m = kNegInf;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * group + tid;
      if (active && j < nvec) {
        const auto xv = load_vec<T, VEC>(x + j * VEC);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          v[i][e] = to_f(xv.v[e]);
          m = fmaxf(m, v[i][e]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[i][e] = kNegInf;
      }
    }
    m = group_reduce<true>(m, group, scratch);
    if (m == kNegInf) m = 0.f;  // all -inf: 0/0 = nan, as torch.softmax gives
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        v[i][e] = exp_for<T>(v[i][e] - m);
        sum += v[i][e];
      }
    }
    const float inv = 1.f / group_reduce<false>(sum, group, scratch);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * group + tid;
      if (active && j < nvec) {
        Vec<T, VEC> o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(v[i][e] * inv);
        store_vec<T, VEC>(out + j * VEC, o);
      }
    }
  } else {
    float m = kNegInf, s = 0.f;  // online: s = sum exp(v - m)
    for (int64_t j = tid; active && j < nvec; j += group) {
      const auto xv = load_vec<T, VEC>(x + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float v = to_f(xv.v[e]);
        if (v > m) {
          s = s * exp_for<T>(m - v) + 1.f;  // exp(-inf) = 0 on the first element
          m = v;
        } else if (v != kNegInf) {
          s += exp_for<T>(v - m);
        } else if (v != v) {
          s = v;  // nan propagates
        }
      }
    }
    float big = group_reduce<true>(m, group, scratch);
    if (big == kNegInf) big = 0.f;
    const float total = group_reduce<false>(m == kNegInf ? 0.f : s * exp_for<T>(m - big), group, scratch);
    const float inv = 1.f / total;
    for (int64_t j = tid; active && j < nvec; j += group) {
      const auto xv = load_vec<T, VEC>(x + j * VEC);
      Vec<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(exp_for<T>(to_f(xv.v[e]) - big) * inv);
      store_vec<T, VEC>(out + j * VEC, o);
    }
  }
}

// Whether a block of `threads` can launch this instantiation: rows kept in
// registers need many per thread, which 1024-thread blocks may not have.
template <typename T, int VEC, int VPT>
bool fits(int threads) {
  static const int max_threads = [] {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, softmax_kernel<T, VEC, VPT>) != cudaSuccess) {
      cudaGetLastError();
      return 1024;
    }
    return attr.maxThreadsPerBlock;
  }();
  return threads <= max_threads;
}

template <typename T, int VEC>
cudaError_t launch(const kpdrSoftmaxArgs& a, int group, int rows_per_block, cudaStream_t stream) {
  const int64_t vpt = ceil_div(a.cols / VEC, group);
  const dim3 grid(static_cast<unsigned>(ceil_div(a.rows, rows_per_block)));
  const int block = group * rows_per_block;
  // The smallest register-resident variant that holds the row and fits the
  // block; else the variant that re-reads the row.
  if (vpt <= 1 && fits<T, VEC, 1>(block)) softmax_kernel<T, VEC, 1><<<grid, block, 0, stream>>>(a, group);
  else if (vpt <= 2 && fits<T, VEC, 2>(block)) softmax_kernel<T, VEC, 2><<<grid, block, 0, stream>>>(a, group);
  else if (vpt <= 4 && fits<T, VEC, 4>(block)) softmax_kernel<T, VEC, 4><<<grid, block, 0, stream>>>(a, group);
  else if (vpt <= kRowMaxVpt && fits<T, VEC, 8>(block)) softmax_kernel<T, VEC, 8><<<grid, block, 0, stream>>>(a, group);
  else softmax_kernel<T, VEC, 0><<<grid, block, 0, stream>>>(a, group);
  return cudaGetLastError();
}

}  // namespace

ConfigList softmax_candidates(const kpdrSoftmaxArgs& a) {
  const int64_t nvec = std::max<int64_t>(1, a.cols / 8);
  return row_candidates(nvec);
}

cudaError_t softmax(const kpdrSoftmaxArgs& a, LaunchConfig cfg, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cudaSuccess;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec16<T>;
    const bool vec = a.cols % V == 0 && a.x_row_stride % V == 0 && a.out_row_stride % V == 0 &&
                     aligned(a.x, 16) && aligned(a.out, 16);
    LaunchConfig c = row_default_config(a.cols / (vec ? V : 1));
    if (cfg.threads >= 32 && cfg.threads <= 1024 && cfg.threads % 32 == 0 && cfg.split >= 1 &&
        cfg.threads * cfg.split <= 1024) {
      c = cfg;
    }
    return vec ? launch<T, V>(a, c.threads, c.split, stream) : launch<T, 1>(a, c.threads, c.split, stream);
  });
}

}  // namespace kp::cuda
