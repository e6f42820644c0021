// Rotary position embedding (apply_rope and its inverse), both pair layouts:
// halves (x[i], x[i + d/2]) and interleaved (x[2i], x[2i+1]).
//
// Launch configuration: one block of `threads` threads per token (batch,
// position), looping over its heads, so the token's cos/sin row is read from
// memory once and from L1 by the other heads.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

namespace kp::cuda {
namespace {

template <typename T, int N, bool kAligned>
__device__ __forceinline__ void load_n(const T* p, float (&v)[N]) {
  if constexpr (kAligned) {
    const Vec<T, N> t = load_vec<T, N>(p);
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] = to_f(t.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) v[e] = to_f(p[e]);
  }
}

template <typename T, int N, bool kAligned>
__device__ __forceinline__ void store_n(T* p, const float (&v)[N]) {
  if constexpr (kAligned) {
    Vec<T, N> t;
#pragma unroll
    for (int e = 0; e < N; ++e) t.v[e] = from_f<T>(v[e]);
    store_vec<T, N>(p, t);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) p[e] = from_f<T>(v[e]);
  }
}

// VEC elements of x per work item: VEC pairs (halves) or VEC/2 pairs (interleaved).
template <typename T, typename CS, int VEC, bool kInterleaved, bool kAligned>
__global__ void rope_kernel(kpdrRopeArgs a) {
  constexpr int NCS = kInterleaved ? VEC / 2 : VEC;
  const int64_t half = a.head_dim / 2;
  // 32-bit index arithmetic inside a token (heads * head_dim is small).
  const int per_head = static_cast<int>(kInterleaved ? a.head_dim / VEC : half / VEC);
  const int items = static_cast<int>(a.heads) * per_head;
  const float sign = a.inverse ? -1.f : 1.f;
  for (int64_t tok = blockIdx.x; tok < a.batch * a.seq; tok += gridDim.x) {
    const int64_t b = tok / a.seq, s = tok % a.seq;
    const T* x = static_cast<const T*>(a.x) + b * a.x_stride[0] + s * a.x_stride[1];
    T* out = static_cast<T*>(a.out) + b * a.out_stride[0] + s * a.out_stride[1];
    const int64_t cs_off = b * a.cs_batch_stride + s * a.cs_seq_stride;
    const CS* cosp = static_cast<const CS*>(a.cos) + cs_off;
    const CS* sinp = static_cast<const CS*>(a.sin) + cs_off;
    for (int item = threadIdx.x; item < items; item += blockDim.x) {
      const int h = item / per_head, p = item % per_head;
      const T* xh = x + h * a.x_stride[2];
      T* oh = out + h * a.out_stride[2];
      float c[NCS], sn[NCS];
      const int ci = p * NCS;
      load_n<CS, NCS, kAligned>(cosp + ci, c);
      load_n<CS, NCS, kAligned>(sinp + ci, sn);
      if constexpr (kInterleaved) {
        float v[VEC], o[VEC];
        load_n<T, VEC, kAligned>(xh + p * VEC, v);
#pragma unroll
        for (int k = 0; k < NCS; ++k) {
          const float s_ = sign * sn[k];
          o[2 * k] = v[2 * k] * c[k] - v[2 * k + 1] * s_;
          o[2 * k + 1] = v[2 * k + 1] * c[k] + v[2 * k] * s_;
        }
        store_n<T, VEC, kAligned>(oh + p * VEC, o);
      } else {
        float x1[VEC], x2[VEC], o1[VEC], o2[VEC];
        load_n<T, VEC, kAligned>(xh + ci, x1);
        load_n<T, VEC, kAligned>(xh + half + ci, x2);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float s_ = sign * sn[k];
          o1[k] = x1[k] * c[k] - x2[k] * s_;
          o2[k] = x2[k] * c[k] + x1[k] * s_;
        }
        store_n<T, VEC, kAligned>(oh + ci, o1);
        store_n<T, VEC, kAligned>(oh + half + ci, o2);
      }
    }
  }
}

template <typename T, typename CS>
bool can_vectorise(const kpdrRopeArgs& a) {
  constexpr int V = kVec16<T>;
  const int ncs = a.interleaved ? V / 2 : V;
  const int cs_bytes = std::min<int>(16, ncs * sizeof(CS));
  bool ok = aligned(a.x, 16) && aligned(a.out, 16) && (a.interleaved ? a.head_dim % V == 0 : (a.head_dim / 2) % V == 0);
  for (int i = 0; i < 3; ++i) ok = ok && a.x_stride[i] % V == 0 && a.out_stride[i] % V == 0;
  ok = ok && aligned(a.cos, cs_bytes) && aligned(a.sin, cs_bytes) && a.cs_batch_stride % ncs == 0 &&
       a.cs_seq_stride % ncs == 0;
  return ok;
}

template <typename T, typename CS>
cudaError_t launch(const kpdrRopeArgs& a, int threads, cudaStream_t stream) {
  constexpr int V = kVec16<T>;
  const int64_t tokens = a.batch * a.seq;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(tokens, 1 << 30));
  if (can_vectorise<T, CS>(a)) {
    if (a.interleaved) rope_kernel<T, CS, V, true, true><<<grid, threads, 0, stream>>>(a);
    else rope_kernel<T, CS, V, false, true><<<grid, threads, 0, stream>>>(a);
  } else {
    if (a.interleaved) rope_kernel<T, CS, 2, true, false><<<grid, threads, 0, stream>>>(a);
    else rope_kernel<T, CS, 1, false, false><<<grid, threads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

int default_threads(const kpdrRopeArgs& a) {
  const int64_t items = a.heads * (a.head_dim / 2) / 4;  // roughly, whatever the width
  int t = 64;
  while (t < 512 && t < items) t <<= 1;
  return t;
}

}  // namespace

ConfigList rope_candidates(const kpdrRopeArgs& a) {
  ConfigList list;
  const int d = default_threads(a);
  list.add(d, 0);
  for (int t : {64, 128, 256, 512, 1024}) {
    if (t != d) list.add(t, 0);
  }
  return list;
}

cudaError_t rope(const kpdrRopeArgs& a, LaunchConfig cfg, cudaStream_t stream) {
  if (a.batch * a.seq * a.heads * a.head_dim == 0) return cudaSuccess;
  const int threads = (cfg.threads >= 32 && cfg.threads <= 1024 && cfg.threads % 32 == 0)
                          ? cfg.threads : default_threads(a);
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    return dispatch_dtype(a.cs_dtype, [&](auto cs_tag) {
      using CS = decltype(cs_tag);
      return launch<T, CS>(a, threads, stream);
    });
  });
}

}  // namespace kp::cuda
