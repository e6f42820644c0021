// rms_norm and fused_add_rms_norm (one pass: x (+ residual) is read once, the
// row stays in registers between the sum of squares and the scaling), and the
// rms_norm backward.
//
// Rows of 16-byte aligned vectors (the common case) go through
// rms_norm_stream_kernel: a persistent block of `threads` threads per row
// (launch configuration: threads = block size, split = resident blocks per
// multiprocessor, 0 = as many as fit) walks the rows gridDim.x apart. Each
// thread holds its part of the row (at most 8 16-byte vectors) and of the
// weight in registers; the weight is read once per block, and the next row's
// loads are issued before the current row is reduced and written, so every
// block keeps a row of reads in flight through the reduction's barriers and
// the stores. (One row per block, without the prefetch, left memory idle
// during those phases: 62-74% of copy bandwidth on the H200.)
//
// rms_norm_kernel, one row per group of `threads` threads and -split rows per
// block (a negative split selects it for aligned rows), the row in registers
// where it fits, else read twice, serves the other rows (unaligned, or longer
// than 8 vectors x 1024 threads; there `split` > 0 is the rows per block)
// and is a tuning candidate of fused_add_rms_norm.
//
// rms_norm_wave_kernel takes that negative split for rms_norm without a
// residual on 16-byte rows of at most 4 vectors per thread: the same one row
// per group, with 32 registers per thread so that a multiprocessor holds
// 2048 threads, and one grid for all rows (no grid-stride prologue). At
// 2048 x 4096 bf16 on the H200 it measured 7.0-7.2 us against 7.6 for the
// streaming kernel (copy of the same bytes: 5.9, from L2); at 8192 x 8192,
// 92-93 us against 99-100 on the H100 (copy 90), 67 against 71.5 on the H200
// (copy 64.5). The tuner, timing candidates from graph replays, picks it at
// both sizes (7.0-7.65 us at 2048 x 4096 in the benchmark's graphs on five
// H200 machines).
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
    if (a.rstd != nullptr && active && tid == 0) static_cast<float*>(a.rstd)[row] = inv;
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
    if (a.rstd != nullptr && active && tid == 0) static_cast<float*>(a.rstd)[row] = inv;
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


// x (+ residual) rows, vectorised, persistent; see the top of the file.
// Hides a vector's value from the optimiser, so that it keeps the 16 packed
// bytes in registers and converts them to float where they are used, instead
// of hoisting the conversion and holding twice as many float registers (which
// spilled at 8 vectors per thread).
template <typename VT>
__device__ __forceinline__ void keep_packed(VT& v) {
  static_assert(sizeof(VT) == 16, "16-byte vectors");
  uint4& u = reinterpret_cast<uint4&>(v);
  asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w));
}

// The largest block of the streaming kernel that keeps its registers (about
// 12 per 16-byte vector and thread: weight, row, next row; 8 more with a
// residual) without spilling.
__host__ __device__ constexpr int stream_max_threads(int vpt, bool residual) {
  return vpt <= 1 ? 1024 : vpt == 2 ? (residual ? 512 : 1024) : vpt == 4 ? 512 : (residual ? 256 : 512);
}

template <typename T, int VPT, bool kResidual>
__global__ void __launch_bounds__(stream_max_threads(VPT, kResidual)) rms_norm_stream_kernel(kpdrRmsNormArgs a) {
  constexpr int V = kVec16<T>;
  using VT = Vec<T, V>;
  __shared__ float scratch[32];
  const int tid = threadIdx.x, G = blockDim.x;
  const int64_t nvec = a.cols / V;
  const T* w = static_cast<const T*>(a.weight);

  VT wv[VPT], cx[VPT], cr[VPT];
  auto load_row = [&](int64_t row, VT (&xv)[VPT], VT (&rv)[VPT]) {
    const T* x = static_cast<const T*>(a.x) + row * a.x_row_stride;
    const T* r = kResidual ? static_cast<const T*>(a.residual) + row * a.residual_row_stride : nullptr;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * G + tid;
      if (j < nvec) {
        xv[i] = load_vec<T, V>(x + j * V);
        if constexpr (kResidual) rv[i] = load_vec<T, V>(r + j * V);
      }
    }
  };
  int64_t row = blockIdx.x;
  if (row < a.rows) load_row(row, cx, cr);
  // The weight after the first row's loads: both are in flight together.
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int64_t j = static_cast<int64_t>(i) * G + tid;
    if (j < nvec) wv[i] = load_vec<T, V>(w + j * V);
  }
  for (; row < a.rows; row += gridDim.x) {
    VT nx[VPT], nr[VPT];
    const int64_t next = row + gridDim.x;
    if (next < a.rows) load_row(next, nx, nr);

    float sumsq = 0.f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * G + tid;
      if (j < nvec) {
        if constexpr (kResidual) {
          // x + residual rounded to T, as the unfused code does.
#pragma unroll
          for (int e = 0; e < V; ++e) cx[i].v[e] = from_f<T>(to_f(cx[i].v[e]) + to_f(cr[i].v[e]));
          store_vec<T, V>(static_cast<T*>(a.residual_out) + row * a.residual_out_row_stride + j * V, cx[i]);
        }
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float f = to_f(cx[i].v[e]);
          sumsq += f * f;
        }
      }
    }
    const float inv = rsqrtf(group_reduce<false>(sumsq, G, scratch) / a.cols + a.eps);
    if (a.rstd != nullptr && tid == 0) static_cast<float*>(a.rstd)[row] = inv;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      keep_packed(cx[i]);
      keep_packed(wv[i]);
    }
    T* out = static_cast<T*>(a.out) + row * a.out_row_stride;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t j = static_cast<int64_t>(i) * G + tid;
      if (j < nvec) {
        VT o;
#pragma unroll
        for (int e = 0; e < V; ++e) o.v[e] = from_f<T>(to_f(cx[i].v[e]) * inv * to_f(wv[i].v[e]));
        store_vec<T, V>(out + j * V, o);
      }
    }
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      cx[i] = nx[i];
      if constexpr (kResidual) cr[i] = nr[i];
    }
  }
}

// One row per group of `group` threads (at most 4 16-byte vectors per
// thread), `rows per block` groups per block, and a group for every row,
// launched at once: no grid-stride loop and no prefetch, so a thread needs few
// registers (the row stays packed; the weight is read after the reduction:
// holding it from the start spilled and measured twice as slow on the H100)
// and 32 per thread let a multiprocessor hold its full 2048
// threads. For row sets of about one wave (2048 x 4096 bf16: 2048 rows of 128
// threads, 16 per multiprocessor) this avoids the persistent kernel's second,
// partial round of rows. The reduction takes one barrier.
constexpr int kWaveMaxVpt = 4;
template <typename T, int VPT>
__global__ void __launch_bounds__(512, 4) rms_norm_wave_kernel(kpdrRmsNormArgs a, int group) {
  constexpr int V = kVec16<T>;
  using VT = Vec<T, V>;
  __shared__ float scratch[16];
  const int G = group, tid = threadIdx.x % G;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / G) + threadIdx.x / G;
  const bool active = row < a.rows;
  const int nvec = static_cast<int>(a.cols / V);  // < 2^31 (checked by the launcher)
  const T* x = static_cast<const T*>(a.x) + row * a.x_row_stride;
  const T* w = static_cast<const T*>(a.weight);
  VT xv[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int j = i * G + tid;
    if (active && j < nvec) xv[i] = load_vec<T, V>(x + j * V);
  }
  float sumsq = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int j = i * G + tid;
    if (active && j < nvec) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float f = to_f(xv[i].v[e]);
        sumsq += f * f;
      }
    }
  }
  sumsq = warp_sum(sumsq);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = sumsq;
  __syncthreads();
  if (!active) return;
  const int first = (threadIdx.x / G) * (G >> 5);
  float total = 0.f;
  for (int k = 0; k < (G >> 5); ++k) total += scratch[first + k];
  const float inv = rsqrtf(total / a.cols + a.eps);
  if (a.rstd != nullptr && tid == 0) static_cast<float*>(a.rstd)[row] = inv;
  T* out = static_cast<T*>(a.out) + row * a.out_row_stride;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    keep_packed(xv[i]);
    const int j = i * G + tid;
    if (j < nvec) {
      const VT wi = load_vec<T, V>(w + j * V);
      VT o;
#pragma unroll
      for (int e = 0; e < V; ++e) o.v[e] = from_f<T>(to_f(xv[i].v[e]) * inv * to_f(wi.v[e]));
      store_vec<T, V>(out + j * V, o);
    }
  }
}

// Vectors per thread of the wave kernel for `threads` per row (0: none fits).
int wave_vpt(int64_t nvec, int threads) {
  if (threads < 32 || threads > 512 || threads % 32 != 0) return 0;
  const int64_t v = ceil_div(nvec, threads);
  return v <= 1 ? 1 : v <= 2 ? 2 : v <= kWaveMaxVpt ? 4 : 0;
}

template <typename T>
cudaError_t launch_wave(const kpdrRmsNormArgs& a, int threads, int rows_per_block, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(a.rows, rows_per_block)));
  const int block = threads * rows_per_block;
  switch (wave_vpt(a.cols / kVec16<T>, threads)) {
    case 1: rms_norm_wave_kernel<T, 1><<<grid, block, 0, stream>>>(a, threads); break;
    case 2: rms_norm_wave_kernel<T, 2><<<grid, block, 0, stream>>>(a, threads); break;
    default: rms_norm_wave_kernel<T, 4><<<grid, block, 0, stream>>>(a, threads); break;
  }
  return cudaGetLastError();
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

// The vector width vec_width picks for a's dtype.
int dispatch_width(const kpdrRmsNormArgs& a) {
  int w = 1;
  dispatch_dtype(a.dtype, [&](auto tag) {
    w = vec_width<decltype(tag)>(a);
    return cudaSuccess;
  });
  return w;
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


// ------------------------------------------------------- streaming launcher

// Vectors per thread of the streaming kernel for `threads` threads per row,
// 0 when the row does not fit in 8 vectors per thread or the block is too
// large for that many.
int stream_vpt(int64_t nvec, int threads, bool residual) {
  const int64_t v = ceil_div(nvec, threads);
  const int vpt = v <= 1 ? 1 : v <= 2 ? 2 : v <= 4 ? 4 : v <= kRowMaxVpt ? 8 : 0;
  return vpt != 0 && threads <= stream_max_threads(vpt, residual) ? vpt : 0;
}

// The default block size of the streaming kernel (about 4 vectors per
// thread, at least 64 threads), or 0 when no block size holds the row.
int stream_default_threads(int64_t nvec, bool residual) {
  for (int t = round_up_pow2(ceil_div(nvec, 4), 64, 1024); t >= 32; t >>= 1) {
    if (stream_vpt(nvec, t, residual) != 0) return t;
  }
  return 0;
}

template <typename T, int VPT, bool kResidual>
cudaError_t launch_stream_vpt(const kpdrRmsNormArgs& a, int threads, int per_sm, cudaStream_t stream) {
  auto kernel = rms_norm_stream_kernel<T, VPT, kResidual>;
  // Resident blocks per multiprocessor of this kernel at this block size,
  // asked once per (instantiation, block size): not a stream operation, so
  // allowed during graph capture.
  static int fit[1025] = {0};
  int& f = fit[threads];
  if (f == 0) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0) != cudaSuccess || n < 1) {
      cudaGetLastError();
      n = 1;
    }
    f = n;
  }
  if (per_sm <= 0 || per_sm > f) per_sm = f;
  const int64_t blocks = std::min<int64_t>(a.rows, static_cast<int64_t>(per_sm) * sm_count());
  kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, bool kResidual>
cudaError_t launch_stream(const kpdrRmsNormArgs& a, int threads, int per_sm, cudaStream_t stream) {
  switch (stream_vpt(a.cols / kVec16<T>, threads, kResidual)) {
    case 1: return launch_stream_vpt<T, 1, kResidual>(a, threads, per_sm, stream);
    case 2: return launch_stream_vpt<T, 2, kResidual>(a, threads, per_sm, stream);
    case 4: return launch_stream_vpt<T, 4, kResidual>(a, threads, per_sm, stream);
    default: return launch_stream_vpt<T, 8, kResidual>(a, threads, per_sm, stream);
  }
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
  const int vec = dispatch_width(a);
  const int64_t nvec = std::max<int64_t>(1, a.cols / vec);
  const bool residual = a.residual != nullptr;
  const int d = vec == 1 ? 0 : stream_default_threads(nvec, residual);
  if (d == 0) return row_candidates(nvec);
  // Streaming kernel: block sizes that hold the row in 1..8 vectors per
  // thread without idle warps, at full residency and at 2 blocks per
  // multiprocessor (fewer measured far slower on the H200).
  ConfigList list;
  list.add(d, 0);
  for (int g = 32; g <= 1024; g <<= 1) {
    if (stream_vpt(nvec, g, residual) == 0 || (g > 32 && g / 2 >= nvec)) continue;
    for (int per_sm : {0, 2}) {
      if (g == d && per_sm == 0) continue;
      list.add(g, per_sm);
    }
  }
  // Without a residual: the wave kernel (split -1: one row per block) at the
  // two smallest groups that hold the row in <= 4 vectors per thread, for row
  // sets of up to about four waves of 16 rows per multiprocessor.
  if (!residual && a.rows <= 4 * static_cast<int64_t>(sm_count()) * 16) {
    int added = 0;
    for (int g = 32; g <= 512 && added < 2; g <<= 1) {
      if (wave_vpt(nvec, g) == 0 || (g > 32 && g / 2 >= nvec)) continue;
      ++added;
      list.add(g, -1);  // two rows per block measured no faster (H100)
    }
  }
  // With a residual, two loads per vector keep enough reads in flight
  // without the prefetch, at the higher residency of the one-row-per-block
  // kernel: it measured up to 6% faster at 8192 x 8192 (H200).
  if (residual) {
    for (int g : {256, 512}) {
      if ((g > 32 && g / 2 >= nvec) || ceil_div(nvec, g) > kRowMaxVpt) continue;
      list.add(g, -1);
    }
  }
  return list;
}

cudaError_t rms_norm(const kpdrRmsNormArgs& a, LaunchConfig cfg, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return cudaSuccess;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int vec = vec_width<T>(a);
    const bool residual = a.residual != nullptr;
    const int64_t nvec = a.cols / vec;
    const int stream_threads = vec == kVec16<T> ? stream_default_threads(nvec, residual) : 0;
    const bool row_kernel_cfg = valid_group(cfg.threads) && cfg.split < 0 && cfg.threads * -cfg.split <= 1024;
    if (stream_threads != 0 && !row_kernel_cfg) {
      int threads = stream_threads, per_sm = 0;
      if (valid_group(cfg.threads) && stream_vpt(nvec, cfg.threads, residual) != 0 && cfg.split >= 0) {
        threads = cfg.threads;
        per_sm = cfg.split;
      }
      return residual ? launch_stream<T, true>(a, threads, per_sm, stream)
                      : launch_stream<T, false>(a, threads, per_sm, stream);
    }
    if (row_kernel_cfg && !residual && vec == kVec16<T> && wave_vpt(nvec, cfg.threads) != 0 &&
        cfg.threads * -cfg.split <= 512 && a.cols <= INT32_MAX && ceil_div(a.rows, -cfg.split) <= INT32_MAX) {
      return launch_wave<T>(a, cfg.threads, -cfg.split, stream);
    }
    LaunchConfig c = row_default_config(nvec);
    if (row_kernel_cfg) c = LaunchConfig{cfg.threads, -cfg.split};
    else if (valid_group(cfg.threads) && cfg.split >= 1 && cfg.threads * cfg.split <= 1024) c = cfg;
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
