// Decode attention (one query token per sequence over its KV cache) with
// grouped-query attention and flash-decoding.
//
// One block handles one (sequence, kv head, split of the cache length) and up
// to GMAX query heads of that kv head's group, so every cached key and value
// row is read from memory once for the whole group. Within a block, a "slot"
// of L lanes (L * VEC * NV >= head_dim) owns one cache row at a time: each
// tile of the cache is processed in three steps separated by barriers:
//   1. K and V rows of the tile are loaded (all loads issued first, so many
//      bytes are in flight), scores q.k * scale go to shared memory;
//   2. one warp per query head updates the running max and sum of the online
//      softmax and turns the tile's scores into probabilities;
//   3. each slot rescales its output accumulators and adds p * v.
// With more than one split, partial (max, sum, unnormalised output) triples go
// to a float32 workspace and a second kernel combines them.
//
// Launch configuration: `threads` per block (64..256), `split` cache splits
// (0: enough blocks to fill the GPU about twice).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

namespace kp::cuda {
namespace {

// Cache rows per slot per tile: as many loads in flight as registers allow.
__host__ __device__ constexpr int unroll_for(int gmax, int nv) {
  return gmax * nv >= 16 ? 2 : gmax * nv >= 8 ? 4 : 8;
}
constexpr float kNegInf = -__builtin_huge_valf();

struct Shape {
  int vec, lanes, nv, gmax;
};

__host__ __device__ constexpr int tile_rows(int threads, int lanes, int gmax, int nv) {
  return (threads / lanes) * unroll_for(gmax, nv);
}

template <typename T, int VEC, int L, int NV, int GMAX>
__global__ void decode_attention_kernel(kpdrDecodeAttentionArgs a, int splits, int64_t chunk,
                                        float* partial_o, float* partial_ml) {
  constexpr int ROW = L * NV * VEC;
  constexpr int SLOTS_PER_WARP = 32 / L;
  constexpr int kUnroll = unroll_for(GMAX, NV);
  extern __shared__ float smem[];
  const int nslots = (blockDim.x / 32) * SLOTS_PER_WARP;
  const int tile = nslots * kUnroll;
  float* s_sh = smem;                    // [GMAX][tile] scores, then probabilities
  float* o_sh = s_sh + GMAX * tile;      // [GMAX][ROW] output of the block
  float* m_sh = o_sh + GMAX * ROW;       // [GMAX] running max
  float* l_sh = m_sh + GMAX;             // [GMAX] running sum
  float* alpha_sh = l_sh + GMAX;         // [GMAX] rescale factor of this tile

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slot = warp * SLOTS_PER_WARP + lane / L, sub = lane % L;
  const int64_t b = blockIdx.z;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t groups_per_kv = (group + GMAX - 1) / GMAX;
  const int64_t kvh = blockIdx.y / groups_per_kv;
  const int64_t h0 = kvh * group + (blockIdx.y % groups_per_kv) * GMAX;
  const int64_t left = kvh * group + group - h0;
  const int nheads = static_cast<int>(left < GMAX ? left : GMAX);
  const int split = blockIdx.x;
  // Lengths above the cache length are clamped to it; lengths < 1 leave
  // nothing to attend to and give 0, as the reference does for masked rows.
  int64_t len = a.lengths != nullptr ? a.lengths[b] : a.cache_len;
  len = len > a.cache_len ? a.cache_len : len;
  const int64_t start = split * chunk;
  const int64_t end = start + chunk < len ? start + chunk : len;

  for (int i = threadIdx.x; i < GMAX * ROW; i += blockDim.x) o_sh[i] = 0.f;
  if (threadIdx.x < GMAX) {
    m_sh[threadIdx.x] = kNegInf;
    l_sh[threadIdx.x] = 0.f;
  }

  // This lane's query elements, pre-scaled.
  float q[GMAX][NV][VEC];
#pragma unroll
  for (int g = 0; g < GMAX; ++g) {
    const T* qp = static_cast<const T*>(a.q) + b * a.q_stride[0] + (h0 + g) * a.q_stride[1];
#pragma unroll
    for (int n = 0; n < NV; ++n) {
      const int d0 = (n * L + sub) * VEC;
      if (g < nheads && d0 < a.head_dim) {
        const auto qv = load_vec<T, VEC>(qp + d0);
#pragma unroll
        for (int e = 0; e < VEC; ++e) q[g][n][e] = to_f(qv.v[e]) * a.scale;
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) q[g][n][e] = 0.f;
      }
    }
  }
  float acc[GMAX][NV][VEC];
#pragma unroll
  for (int g = 0; g < GMAX; ++g)
#pragma unroll
    for (int n = 0; n < NV; ++n)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[g][n][e] = 0.f;

  const T* kbase = static_cast<const T*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
  const T* vbase = static_cast<const T*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];

  for (int64_t t0 = start; t0 < end; t0 += tile) {
    // 1. loads and scores
    Vec<T, VEC> kr[kUnroll][NV], vr[kUnroll][NV];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t t = t0 + slot + u * nslots;
#pragma unroll
      for (int n = 0; n < NV; ++n) {
        const int d0 = (n * L + sub) * VEC;
        if (t < end && d0 < a.head_dim) {
          kr[u][n] = load_vec<T, VEC>(kbase + t * a.k_stride[2] + d0);
          vr[u][n] = load_vec<T, VEC>(vbase + t * a.v_stride[2] + d0);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) kr[u][n].v[e] = vr[u][n].v[e] = from_f<T>(0.f);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t t = t0 + slot + u * nslots;
      float kf[NV][VEC];  // converted once, used by every head of the group
#pragma unroll
      for (int n = 0; n < NV; ++n)
#pragma unroll
        for (int e = 0; e < VEC; ++e) kf[n][e] = to_f(kr[u][n].v[e]);
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int n = 0; n < NV; ++n)
#pragma unroll
          for (int e = 0; e < VEC; ++e) dot += q[g][n][e] * kf[n][e];
        dot = warp_sum(dot, L);
        if (sub == 0) s_sh[g * tile + slot + u * nslots] = t < end ? dot : kNegInf;
      }
    }
    __syncthreads();
    // 2. online softmax, one warp per head
    for (int g = warp; g < GMAX; g += blockDim.x / 32) {
      float mt = kNegInf;
      for (int i = lane; i < tile; i += 32) mt = fmaxf(mt, s_sh[g * tile + i]);
      mt = warp_max(mt);
      const float m_old = m_sh[g];
      const float m_new = fmaxf(m_old, mt);
      const float m_safe = m_new == kNegInf ? 0.f : m_new;
      float sum = 0.f;
      for (int i = lane; i < tile; i += 32) {
        const float p = exp_for<T>(s_sh[g * tile + i] - m_safe);
        s_sh[g * tile + i] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float alpha = exp_for<T>(m_old - m_safe);
        l_sh[g] = l_sh[g] * alpha + sum;
        m_sh[g] = m_new;
        alpha_sh[g] = alpha;
      }
    }
    __syncthreads();
    // 3. p * v
#pragma unroll
    for (int g = 0; g < GMAX; ++g) {
      const float alpha = alpha_sh[g];
#pragma unroll
      for (int n = 0; n < NV; ++n)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[g][n][e] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[NV][VEC];  // converted once, used by every head of the group
#pragma unroll
      for (int n = 0; n < NV; ++n)
#pragma unroll
        for (int e = 0; e < VEC; ++e) vf[n][e] = to_f(vr[u][n].v[e]);
#pragma unroll
      for (int g = 0; g < GMAX; ++g) {
        const float p = s_sh[g * tile + slot + u * nslots];
#pragma unroll
        for (int n = 0; n < NV; ++n)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[g][n][e] += p * vf[n][e];
      }
    }
    __syncthreads();
  }

  // Sum the slots' accumulators.
#pragma unroll
  for (int g = 0; g < GMAX; ++g)
#pragma unroll
    for (int n = 0; n < NV; ++n)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (nslots > 1) atomicAdd(&o_sh[g * ROW + (n * L + sub) * VEC + e], acc[g][n][e]);
        else o_sh[g * ROW + (n * L + sub) * VEC + e] = acc[g][n][e];
      }
  __syncthreads();

  const int64_t D = a.head_dim;
  for (int64_t i = threadIdx.x; i < nheads * D; i += blockDim.x) {
    const int g = static_cast<int>(i / D);
    const int64_t d = i % D;
    const int64_t h = h0 + g;
    if (splits == 1) {
      T* out = static_cast<T*>(a.out) + b * a.out_stride[0] + h * a.out_stride[1];
      out[d] = from_f<T>(l_sh[g] > 0.f ? o_sh[g * ROW + d] / l_sh[g] : 0.f);
    } else {
      partial_o[((b * a.heads + h) * splits + split) * D + d] = o_sh[g * ROW + d];
    }
  }
  if (splits > 1 && threadIdx.x < nheads) {
    const int64_t h = h0 + threadIdx.x;
    float* ml = partial_ml + ((b * a.heads + h) * splits + split) * 2;
    ml[0] = m_sh[threadIdx.x];
    ml[1] = l_sh[threadIdx.x];
  }
}

// out[b, h] = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s
template <typename T>
__global__ void combine_kernel(kpdrDecodeAttentionArgs a, int splits, const float* partial_o,
                               const float* partial_ml) {
  const int64_t b = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const float* ml = partial_ml + (b * a.heads + h) * splits * 2;
  const float* po = partial_o + (b * a.heads + h) * splits * a.head_dim;
  float big = kNegInf;
  for (int s = 0; s < splits; ++s) big = fmaxf(big, ml[2 * s]);
  float denom = 0.f;
  for (int s = 0; s < splits; ++s) {
    if (ml[2 * s] != kNegInf) denom += expf(ml[2 * s] - big) * ml[2 * s + 1];
  }
  T* out = static_cast<T*>(a.out) + b * a.out_stride[0] + h * a.out_stride[1];
  for (int64_t d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float num = 0.f;
    for (int s = 0; s < splits; ++s) {
      if (ml[2 * s] != kNegInf) num += expf(ml[2 * s] - big) * po[s * a.head_dim + d];
    }
    out[d] = from_f<T>(denom > 0.f ? num / denom : 0.f);
  }
}

template <typename T>
bool vectorisable(const kpdrDecodeAttentionArgs& a) {
  constexpr int V = kVec16<T>;
  bool ok = a.head_dim % V == 0 && aligned(a.q, 16) && aligned(a.k, 16) && aligned(a.v, 16);
  for (int i = 0; i < 2; ++i) ok = ok && a.q_stride[i] % V == 0;
  for (int i = 0; i < 3; ++i) ok = ok && a.k_stride[i] % V == 0 && a.v_stride[i] % V == 0;
  return ok;
}

// Lanes per row and vectors per lane for this head_dim; lanes == 0: unsupported.
template <typename T>
Shape shape_for(const kpdrDecodeAttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads;
  const int gmax = group >= 8 ? 8 : group >= 4 ? 4 : group >= 2 ? 2 : 1;
  if (vectorisable<T>(a)) {
    const int64_t nvec = a.head_dim / kVec16<T>;
    if (nvec <= 8) return {kVec16<T>, 8, 1, gmax};
    if (nvec <= 16) return {kVec16<T>, 16, 1, gmax};
    if (nvec <= 32) return {kVec16<T>, 32, 1, gmax};
    if (nvec <= 64) return {kVec16<T>, 32, 2, gmax};
  }
  if (a.head_dim <= 64) return {1, 32, 2, gmax};
  if (a.head_dim <= 256) return {1, 32, 8, gmax};
  return {1, 0, 0, gmax};
}

int default_threads() { return 128; }

int choose_splits(const kpdrDecodeAttentionArgs& a, int threads, const Shape& sh, int requested) {
  const int gmax = sh.gmax;
  const int64_t tile = tile_rows(threads, sh.lanes, gmax, sh.nv);
  const int64_t max_splits = std::max<int64_t>(1, ceil_div(a.cache_len, tile));
  int64_t s = requested;
  if (s <= 0) {
    const int64_t group = a.heads / a.kv_heads;
    const int64_t blocks = a.batch * a.kv_heads * ceil_div(group, gmax);
    s = ceil_div(2 * sm_count(), std::max<int64_t>(1, blocks));
    // Splits shorter than a few tiles cost more in combining than they gain.
    s = std::min<int64_t>(s, std::max<int64_t>(1, a.cache_len / (4 * tile)));
  }
  return static_cast<int>(std::min<int64_t>({s, max_splits, 256}));
}

int valid_threads(int t) { return (t == 64 || t == 128 || t == 256) ? t : default_threads(); }

template <typename T, int VEC, int L, int NV, int GMAX>
cudaError_t launch(const kpdrDecodeAttentionArgs& a, int threads, int splits, void* ws, cudaStream_t stream) {
  const int64_t tile = tile_rows(threads, L, GMAX, NV);
  const int64_t chunk = ceil_div(ceil_div(a.cache_len, splits), tile) * tile;
  const int64_t group = a.heads / a.kv_heads;
  const dim3 grid(splits, static_cast<unsigned>(a.kv_heads * ceil_div(group, GMAX)), static_cast<unsigned>(a.batch));
  const size_t smem = sizeof(float) * (GMAX * tile + GMAX * L * NV * VEC + 3 * GMAX);
  float* po = static_cast<float*>(ws);
  float* pml = po == nullptr ? nullptr : po + a.batch * a.heads * splits * a.head_dim;
  decode_attention_kernel<T, VEC, L, NV, GMAX><<<grid, threads, smem, stream>>>(a, splits, chunk, po, pml);
  if (splits > 1) {
    const int ct = static_cast<int>(std::min<int64_t>(1024, ceil_div(a.head_dim, 32) * 32));
    combine_kernel<T><<<static_cast<unsigned>(a.batch * a.heads), ct, 0, stream>>>(a, splits, po, pml);
  }
  return cudaGetLastError();
}

template <typename T, int VEC, int L, int NV>
cudaError_t launch_g(const kpdrDecodeAttentionArgs& a, int gmax, int threads, int splits, void* ws,
                     cudaStream_t stream) {
  switch (gmax) {
    case 8: return launch<T, VEC, L, NV, 8>(a, threads, splits, ws, stream);
    case 4: return launch<T, VEC, L, NV, 4>(a, threads, splits, ws, stream);
    case 2: return launch<T, VEC, L, NV, 2>(a, threads, splits, ws, stream);
    default: return launch<T, VEC, L, NV, 1>(a, threads, splits, ws, stream);
  }
}

template <typename T>
cudaError_t launch_shape(const kpdrDecodeAttentionArgs& a, Shape sh, int threads, int splits, void* ws,
                         cudaStream_t stream) {
  constexpr int V = kVec16<T>;
  if (sh.vec == V) {
    if (sh.lanes == 8) return launch_g<T, V, 8, 1>(a, sh.gmax, threads, splits, ws, stream);
    if (sh.lanes == 16) return launch_g<T, V, 16, 1>(a, sh.gmax, threads, splits, ws, stream);
    if (sh.nv == 1) return launch_g<T, V, 32, 1>(a, sh.gmax, threads, splits, ws, stream);
    return launch_g<T, V, 32, 2>(a, sh.gmax, threads, splits, ws, stream);
  }
  if (sh.nv == 2) return launch_g<T, 1, 32, 2>(a, sh.gmax, threads, splits, ws, stream);
  return launch_g<T, 1, 32, 8>(a, sh.gmax, threads, splits, ws, stream);
}

template <typename Fn>
auto with_shape(const kpdrDecodeAttentionArgs& a, Fn&& fn) {
  switch (a.dtype) {
    case KPDR_DTYPE_FLOAT16: return fn(shape_for<__half>(a));
    case KPDR_DTYPE_BFLOAT16: return fn(shape_for<__nv_bfloat16>(a));
    default: return fn(shape_for<float>(a));
  }
}

}  // namespace

bool decode_attention_supported(const kpdrDecodeAttentionArgs& a) {
  return a.kv_heads > 0 && a.heads % a.kv_heads == 0 && with_shape(a, [](Shape s) { return s.lanes > 0; });
}

ConfigList decode_attention_candidates(const kpdrDecodeAttentionArgs&) {
  ConfigList list;
  list.add(default_threads(), 0);
  for (int t : {128, 256, 64}) {
    for (int s : {1, 2, 4, 8, 16, 32}) list.add(t, s);
  }
  return list;
}

size_t decode_attention_workspace_bytes(const kpdrDecodeAttentionArgs& a, LaunchConfig cfg) {
  return with_shape(a, [&](Shape sh) -> size_t {
    if (sh.lanes == 0) return 0;
    const int splits = choose_splits(a, valid_threads(cfg.threads), sh, cfg.split);
    if (splits <= 1) return 0;
    return sizeof(float) * static_cast<size_t>(a.batch * a.heads * splits) * static_cast<size_t>(a.head_dim + 2);
  });
}

cudaError_t decode_attention(const kpdrDecodeAttentionArgs& a, LaunchConfig cfg, void* workspace,
                             cudaStream_t stream) {
  if (a.batch * a.heads == 0 || a.head_dim == 0) return cudaSuccess;
  if (!decode_attention_supported(a)) return cudaErrorInvalidValue;
  const int threads = valid_threads(cfg.threads);
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Shape sh = shape_for<T>(a);
    int splits = choose_splits(a, threads, sh, cfg.split);
    if (splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
    return launch_shape<T>(a, sh, threads, splits, workspace, stream);
  });
}

}  // namespace kp::cuda
