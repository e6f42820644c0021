// Shared device helpers of the CUDA kernel library: storage types, 16-byte
// vector loads, reductions and the dtype dispatch. Torch-free, like the rest
// of csrc/kernels: kernels take kpdr descriptors and a cudaStream_t.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "runtime/kpdr.h"

namespace kp::cuda {

template <typename T> struct Storage;
template <> struct Storage<float> {
  __device__ __forceinline__ static float to_float(float v) { return v; }
  __device__ __forceinline__ static float from_float(float v) { return v; }
};
template <> struct Storage<__half> {
  __device__ __forceinline__ static float to_float(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <> struct Storage<__nv_bfloat16> {
  __device__ __forceinline__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

template <typename T> __device__ __forceinline__ float to_f(T v) { return Storage<T>::to_float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v) { return Storage<T>::from_float(v); }

// N elements moved as one (up to 16-byte) access; wider vectors become
// several 16-byte accesses.
template <typename T, int N>
struct alignas(sizeof(T) * N <= 16 ? sizeof(T) * N : 16) Vec {
  T v[N];
};

// Elements per 16-byte access.
template <typename T> constexpr int kVec16 = 16 / sizeof(T);

// Loads and stores go through 16/8/4-byte integer words: a plain struct copy
// of Vec is sometimes split by the compiler into 2-byte accesses (seen in the
// PTX of rms_norm's unrolled stores), which costs bandwidth.
template <typename T, int N>
union VecWords {
  static constexpr int kBytes = sizeof(T) * N;
  Vec<T, N> vec;
  uint4 w16[kBytes / 16 > 0 ? kBytes / 16 : 1];
  uint2 w8;
  uint32_t w4;
  uint16_t w2;
};

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  constexpr int B = sizeof(T) * N;
  VecWords<T, N> u;
  if constexpr (B % 16 == 0) {
#pragma unroll
    for (int i = 0; i < B / 16; ++i) u.w16[i] = reinterpret_cast<const uint4*>(p)[i];
  } else if constexpr (B == 8) {
    u.w8 = *reinterpret_cast<const uint2*>(p);
  } else if constexpr (B == 4) {
    u.w4 = *reinterpret_cast<const uint32_t*>(p);
  } else if constexpr (B == 2) {
    u.w2 = *reinterpret_cast<const uint16_t*>(p);
  } else {
    u.vec = *reinterpret_cast<const Vec<T, N>*>(p);
  }
  return u.vec;
}

// The raw bits of one element, widened to 32 bits.
__device__ __forceinline__ uint32_t element_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ uint32_t element_bits(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ uint32_t element_bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

// Stores pack the elements into 32-bit words by hand and write them as one
// 16/8/4-byte access per 16 bytes: the compiler otherwise splits some struct
// stores into 2-byte ones (seen in rms_norm's PTX), which costs bandwidth.
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  constexpr int B = sizeof(T) * N;
  if constexpr (B % 4 == 0 && B >= 4) {
    constexpr int W = B / 4;          // 32-bit words
    constexpr int E = 4 / sizeof(T);  // elements per word
    uint32_t w[W];
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if constexpr (E == 1) {
        w[k] = element_bits(v.v[k]);
      } else {
        w[k] = element_bits(v.v[2 * k]) | (element_bits(v.v[2 * k + 1]) << 16);
      }
    }
    if constexpr (W % 4 == 0) {
#pragma unroll
      for (int k = 0; k < W; k += 4) {
        reinterpret_cast<uint4*>(p)[k / 4] = make_uint4(w[k], w[k + 1], w[k + 2], w[k + 3]);
      }
    } else if constexpr (W == 2) {
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    } else if constexpr (W == 1) {
      *reinterpret_cast<uint32_t*>(p) = w[0];
    } else {
#pragma unroll
      for (int k = 0; k < W; ++k) reinterpret_cast<uint32_t*>(p)[k] = w[k];
    }
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) p[e] = v.v[e];
  }
}

__device__ __forceinline__ float warp_sum(float v, int width = 32) {
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, width);
  return v;
}
__device__ __forceinline__ float warp_max(float v, int width = 32) {
  for (int o = width / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o, width));
  return v;
}

// Reduction over a group of `group` consecutive threads (a multiple of 32, or
// the whole block) that all call it; `scratch` holds one float per warp of the
// block. Every thread of the group gets the result.
template <bool kMax>
__device__ __forceinline__ float group_reduce(float v, int group, float* scratch) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if (group <= 32) return v;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int first = (threadIdx.x / group) * (group >> 5);
  float r = scratch[first];
  for (int w = 1; w < (group >> 5); ++w) r = kMax ? fmaxf(r, scratch[first + w]) : r + scratch[first + w];
  return r;
}

__device__ __forceinline__ float silu_f(float v) { return v / (1.f + __expf(-v)); }

inline bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Calls fn(T{}) with T the storage type of `dtype`.
template <typename Fn>
cudaError_t dispatch_dtype(kpdrDtype dtype, Fn&& fn) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: return fn(float{});
    case KPDR_DTYPE_FLOAT16: return fn(__half{});
    case KPDR_DTYPE_BFLOAT16: return fn(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}


}  // namespace kp::cuda

namespace kp::cuda {
// exp in the precision the storage type deserves: fast for 16-bit types.
template <typename T>
__device__ __forceinline__ float exp_for(float v) {
  if constexpr (sizeof(T) == 4) return expf(v);
  else return __expf(v);
}
}  // namespace kp::cuda
