// Decode attention (one query token per sequence over its KV cache) with
// grouped-query attention, flash-decoding style.
//
// Grid: (cache splits, kv heads x head groups, batch). One block of 128
// threads handles one (sequence, kv head, split of the cache length) and up to
// GMAX query heads of that kv head's group, so every cached key and value row
// is read from memory once for the whole group.
//
// The block streams its part of the cache through shared memory in tiles of
// TILE rows (16 KB of K and as much of V), kStages deep with cp.async so
// the next tiles are in flight while this one is computed. Each warp owns
// TILE / 4 rows of every tile and keeps its own online-softmax state (running
// max, sum and output accumulators per head), so a tile needs no block-wide
// barrier beyond the copy pipeline's:
//   - scores: LPR = TILE / 64 lanes own one cache row and compute its full
//     dot products with the group's queries (held in shared memory, float32,
//     pre-scaled) from 16-byte reads, then one log2(LPR)-step reduction;
//   - softmax: one warp max per head per tile, probabilities to shared memory;
//   - p * v: the warp walks its rows, every lane owning head_dim / 32 output
//     columns of every head.
// The four warps' states are merged at the end of the block; with more than
// one split, the block writes its (max, sum, unnormalised output) to a
// float32 workspace and a small second kernel combines the splits (on sm_90
// a programmatic dependent launch, scheduled while the first kernel drains).
//
// 16-bit caches with head_dim <= 128 take the tensor-core kernel further
// down (mma.sync for both products); on sm_90 its tiles come from tensor-map
// copies (TMA) issued by one thread, which is what reaches the DRAM bandwidth
// that cuDNN's decode kernel reaches (see "tensor copies" below).
//
// On sm_90 the tensor-core kernels are themselves programmatic dependent
// launches: a block initialises its barriers, waits (griddepcontrol.wait)
// for the previous kernel, and the copy thread requests every stage's first
// tile before anything else, so launch and set-up overlap the previous
// kernel's drain (0.3-0.8 us per call on the H200).
//
// Measured on the H200/H100 (B=8, H=32, Hkv=8, D=128, bf16) and not kept:
// three tensor-copy stages (1-4% slower); 3, 5, 6 or 8 splits instead of 4
// (1-6% slower); L2 promotion 256B (6% slower at 16k/32k); the combine
// letting the next kernel launch at its start (its waiting blocks then take
// multiprocessors and the next attention grid lands unevenly: 3-4% slower);
// the combine done by the last-arriving split block (atomic counter), naive
// version 4 us slower; a tail of small blocks (15% of every pair's rows in
// blocks started after all the big ones, so fast multiprocessors take more)
// 1-5% slower: a block pays several microseconds before its first tile
// arrives under load. Per-block timestamps (H100, T=4k..32k) show why a
// static split leaves 6-8% on the table: the same fifth of the
// multiprocessors (fixed TPCs) streams ~20% faster, so their blocks finish
// early and idle; only persistent blocks taking work dynamically (with a
// continuous copy pipeline across work units) would recover it.
//
// Launch configuration: `split` cache splits (0: about two blocks per
// multiprocessor); `threads` is fixed at 128.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

#include <cuda.h>  // CUtensorMap (types only: the encoder is found at run time)
#include <cudaTypedefs.h>

#include <type_traits>

namespace kp::cuda {
namespace {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Copy stages: two (one tile loads while one is computed; ~74 KB of shared
// memory per block for bf16, head_dim 128, three blocks per multiprocessor).
// Three or more stages measured no faster on the H200: the loop is bound by
// memory bandwidth, not latency, once two blocks share a multiprocessor.
// (-DKP_DECODE_STAGES=N builds another depth, for such measurements.)
#ifndef KP_DECODE_STAGES
#define KP_DECODE_STAGES 2
#endif
constexpr int kStages = KP_DECODE_STAGES;
// Stages of the tensor-copy (sm_90) tensor-core kernel: two (64 KB for bf16,
// head_dim 128) measured as fast as three and four on the H200 at the default
// split and faster at others (more blocks fit a multiprocessor).
#ifndef KP_DECODE_BULK_STAGES
#define KP_DECODE_BULK_STAGES 2
#endif
constexpr int kBulkStages = KP_DECODE_BULK_STAGES;
// -DKP_DECODE_BULK=0 keeps the cp.async kernel on sm_90 too (for measurements).
#ifndef KP_DECODE_BULK
#define KP_DECODE_BULK 1
#endif

// head_dim rounded up to the kernel's padded width; 0: unsupported.
inline int padded_dim(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 128 : d <= 256 ? 256 : 0; }

template <typename T, int DP>
struct Tiling {
  static constexpr int kRowBytes = DP * static_cast<int>(sizeof(T));
  static constexpr int kE = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte chunk
  static constexpr int kChunks = kRowBytes / 16;                // chunks per row
  // About 16 KB of K (and as much of V) per tile.
  static constexpr int kTile = 16384 / kRowBytes;               // 16..128 rows
  static constexpr int kLpr = kThreads / kTile;                 // lanes per row for the scores
  static constexpr int kRowsPerWarp = kTile / kWarps;
  // One 16-byte chunk of padding per row plus the chunk order of chunk()
  // keep the row-per-lane-group reads free of bank conflicts.
  static constexpr int kRowStride = kRowBytes + 16;             // bytes
  static constexpr int kStageBytes = 2 * kTile * kRowStride;    // K then V
  static constexpr int kNpl = DP / 32;                          // output columns per lane
  static constexpr int kChunksPerLane = kChunks / kLpr;         // 8
  static_assert(kLpr >= 1 && kLpr <= 8 && kChunksPerLane == 8, "tiling");
  // The j-th chunk read by lane `sub` of a row's lane group. A quarter warp
  // (8 lanes, one shared-memory wavefront of 16-byte reads) covers 8 / kLpr
  // rows r and kLpr lanes; with rows kRowBytes + 16 apart, a chunk c of row r
  // lands in 16-byte bank group (r + c) mod 8, and rotating each lane's chunks
  // by sub * 8 / kLpr makes those 8 groups distinct.
  __device__ __forceinline__ static int chunk(int sub, int j) {
    return sub * kChunksPerLane + ((j + sub * (8 / kLpr)) & 7);
  }
};

template <int G, int DP>
__host__ __device__ constexpr int extra_smem_bytes() {
  // q [G][DP] float32, probabilities [kWarps][rows per warp <= 32][G].
  return static_cast<int>(sizeof(float)) * (G * DP + kWarps * 32 * G);
}

// The copy stages, which the warps' merge at the end reuses.
template <typename T, int DP, int G>
__host__ __device__ constexpr int stage_area_bytes() {
  constexpr int merge = static_cast<int>(sizeof(float)) * kWarps * G * (DP + 2);
  constexpr int stages = kStages * Tiling<T, DP>::kStageBytes;
  return stages > merge ? stages : merge;
}

template <typename T, int DP, int G>
__host__ __device__ constexpr int smem_bytes() {
  return stage_area_bytes<T, DP, G>() + extra_smem_bytes<G, DP>();
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // The L2::128B prefetch hint measured 2-3% faster than none or L2::256B
  // on the H200 (decode B=8, H=32, Hkv=8, D=128, T=4k..32k).
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
#else
  *reinterpret_cast<uint4*>(smem) = *reinterpret_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ---------------------------------------------------------- tensor copies
// On sm_90 the tensor-core kernel fills its tiles with the tensor memory
// accelerator: one thread issues four copies per tile (K and V, two 64-column
// boxes each), completion is counted in bytes on an mbarrier, and the copies
// bypass the load/store unit. The boxes land with the 128-byte swizzle (16-byte
// chunk c of row r stored at chunk c ^ (r % 8)), which keeps ldmatrix free of
// bank conflicts without padded rows. Measured with Nsight Compute on the H200
// (B=8, H=32, Hkv=8, D=128, bf16, T=16k; both read exactly the cache's bytes
// from DRAM): 16-byte cp.async per thread reached 80% of peak DRAM throughput,
// these copies 88% (cuDNN's decode kernel: 87%), with 20% fewer instructions.
// One bulk copy per 256-byte row (cp.async.bulk into padded rows) reached only
// 64%: the copy engine is slow on small copies.
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
  // Make the initialised barrier visible to the async proxy (the tensor copies).
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// One arrival that also announces `bytes` more to come in this phase. The
// copies of the phase may complete before or after it (the transaction count
// may go transiently negative); the phase ends once both are in.
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
#endif
}
// Box {c0 (column), c1 (row), c2 (kv head), c3 (sequence)} of the 4-d map.
__device__ __forceinline__ void tensor_copy(void* smem, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(smem)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
#endif
}

// A cudaLaunchKernelEx configuration, optionally a programmatic dependent
// launch (sm_90: the kernel waits for its predecessor in-kernel).
struct Launch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr[1]{};
  Launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool programmatic) {
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = programmatic ? 1 : 0;
  }
  Launch(const Launch&) = delete;  // cfg.attrs points into this object
  Launch& operator=(const Launch&) = delete;
};

// Tensor maps of the K and V caches as [batch][kv head][row][column] with
// boxes of 64 columns x kTile rows (kernel parameters: __grid_constant__).
struct TmaMaps {
  CUtensorMap k, v;
};

// What one block works on: sequence b, kv head kvh, query heads h0 ..
// h0 + nheads - 1, cache rows [start, end) of split `split`.
struct BlockWork {
  int64_t b, kvh, h0, start, end;
  int nheads, split;
};

template <int G>
__device__ __forceinline__ BlockWork block_work(const kpdrDecodeAttentionArgs& a, int64_t chunk) {
  BlockWork w;
  w.b = blockIdx.z;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t groups_per_kv = (group + G - 1) / G;
  w.kvh = blockIdx.y / groups_per_kv;
  w.h0 = w.kvh * group + (blockIdx.y % groups_per_kv) * G;
  const int64_t left = w.kvh * group + group - w.h0;
  w.nheads = static_cast<int>(left < G ? left : G);
  w.split = blockIdx.x;
  // Lengths above the cache length are clamped to it; lengths < 1 leave
  // nothing to attend to and give 0, as the reference does for masked rows.
  int64_t len = a.lengths != nullptr ? a.lengths[w.b] : a.cache_len;
  len = len > a.cache_len ? a.cache_len : len;
  w.start = w.split * chunk;
  w.end = w.start + chunk < len ? w.start + chunk : len;
  return w;
}

// The end of a block: the warps' (max, sum, output) states, already in
// shared memory (mo [kWarps][G][DP], mm and ml [kWarps][G], max in natural-log
// units), merged into the block's result: the output itself with one split,
// else the split's partial triple for combine_kernel.
template <typename T, int DP, int G>
__device__ __forceinline__ void write_block_result(const kpdrDecodeAttentionArgs& a, const float* mo, const float* mm,
                                                   const float* ml, int nheads, int64_t b, int64_t h0, int split,
                                                   int splits, float* partial_o, float* partial_ml) {
  const int D = static_cast<int>(a.head_dim);
  __syncthreads();
  for (int i = threadIdx.x; i < nheads * D; i += kThreads) {
    const int g = i / D, d = i % D;
    float big = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) big = fmaxf(big, mm[w * G + g]);
    float num = 0.f, den = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = mm[w * G + g];
      const float f = mw == kNegInf ? 0.f : exp_for<T>(mw - big);
      num += f * mo[(w * G + g) * DP + d];
      den += f * ml[w * G + g];
    }
    const int64_t h = h0 + g;
    if (splits == 1) {
      T* out = static_cast<T*>(a.out) + b * a.out_stride[0] + h * a.out_stride[1];
      out[d] = from_f<T>(den > 0.f ? num / den : 0.f);
    } else {
      partial_o[((b * a.heads + h) * splits + split) * D + d] = num;
      if (d == 0) {
        float* pml = partial_ml + ((b * a.heads + h) * splits + split) * 2;
        pml[0] = big;
        pml[1] = den;
      }
    }
  }
}

// ASYNC: rows are 16-byte aligned and head_dim is a whole number of chunks,
// so tiles are copied with cp.async; otherwise element by element.
template <typename T, int DP, int G, bool ASYNC>
__global__ void __launch_bounds__(kThreads)
decode_attention_kernel(kpdrDecodeAttentionArgs a, int splits, int64_t chunk, float* partial_o,
                        float* partial_ml) {
  using TL = Tiling<T, DP>;
  constexpr int TILE = TL::kTile, LPR = TL::kLpr, RW = TL::kRowsPerWarp, E = TL::kE, NPL = TL::kNpl;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* stages = smem_raw;
  float* q_sh = reinterpret_cast<float*>(smem_raw + stage_area_bytes<T, DP, G>());  // [G][DP]
  float* p_sh = q_sh + G * DP;                                     // [kWarps][32][G]

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const BlockWork w = block_work<G>(a, chunk);
  const int64_t b = w.b, kvh = w.kvh, h0 = w.h0, start = w.start, end = w.end;
  const int nheads = w.nheads, split = w.split;
  const int D = static_cast<int>(a.head_dim);

  // Queries of the group, pre-scaled, zero beyond head_dim and nheads.
  for (int i = tid; i < G * DP; i += kThreads) {
    const int g = i / DP, d = i % DP;
    float v = 0.f;
    if (g < nheads && d < D) {
      const T* qp = static_cast<const T*>(a.q) + b * a.q_stride[0] + (h0 + g) * a.q_stride[1];
      v = to_f(qp[d]) * a.scale;
    }
    q_sh[i] = v;
  }
  // Columns beyond head_dim are never copied: zero them once so the padded
  // dot products and p * v see zeros, not stale bits.
  if (D < DP) {
    for (int i = tid; i < kStages * 2 * TILE * (DP - D); i += kThreads) {
      const int row = i / (DP - D), d = D + i % (DP - D);
      reinterpret_cast<T*>(stages + row * TL::kRowStride)[d] = from_f<T>(0.f);
    }
  }

  const T* kbase = static_cast<const T*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
  const T* vbase = static_cast<const T*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];
  const int64_t kst = a.k_stride[2], vst = a.v_stride[2];

  auto load_tile = [&](int64_t t0, int st) {
    unsigned char* ks = stages + st * TL::kStageBytes;
    unsigned char* vs = ks + TILE * TL::kRowStride;
    if constexpr (ASYNC) {
      const int cpr = D / E;  // chunks of this row that hold data
      for (int i = tid; i < TILE * TL::kChunks; i += kThreads) {
        const int r = i / TL::kChunks, c = i % TL::kChunks;
        const int64_t t = t0 + r;
        if (c < cpr && t < end) {
          cp_async16(ks + r * TL::kRowStride + c * 16, kbase + t * kst + c * E);
          cp_async16(vs + r * TL::kRowStride + c * 16, vbase + t * vst + c * E);
        }
      }
    } else {
      for (int i = tid; i < TILE * D; i += kThreads) {
        const int r = i / D, d = i % D;
        const int64_t t = t0 + r;
        if (t < end) {
          reinterpret_cast<T*>(ks + r * TL::kRowStride)[d] = kbase[t * kst + d];
          reinterpret_cast<T*>(vs + r * TL::kRowStride)[d] = vbase[t * vst + d];
        }
      }
    }
  };

  // This warp's online-softmax state. l is summed per lane (one lane per row
  // counts) and reduced once at the end.
  float m[G], l[G], acc[G][NPL];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = kNegInf;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < NPL; ++e) acc[g][e] = 0.f;
  }

  const int64_t ntiles = end > start ? (end - start + TILE - 1) / TILE : 0;
  __syncthreads();  // zeroed padding before any copy lands next to it
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ntiles) load_tile(start + s * TILE, s);
    cp_async_commit();
  }
  const int grp = lane / LPR, sub = lane % LPR;
  const int my_row = warp * RW + grp;  // row of the tile whose scores this lane computes
  for (int64_t it = 0; it < ntiles; ++it) {
    const int64_t t0 = start + it * TILE;
    if (it + kStages - 1 < ntiles) load_tile(t0 + (kStages - 1) * TILE, static_cast<int>((it + kStages - 1) % kStages));
    cp_async_commit();
    cp_async_wait<kStages - 1>();
    __syncthreads();
    const unsigned char* ks = stages + static_cast<int>(it % kStages) * TL::kStageBytes;
    const unsigned char* vs = ks + TILE * TL::kRowStride;

    // Scores of this lane group's row for every head.
    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0.f;
    const unsigned char* krow = ks + my_row * TL::kRowStride;
#pragma unroll
    for (int j = 0; j < TL::kChunksPerLane; ++j) {
      const int c = TL::chunk(sub, j);
      const auto kv = load_vec<T, E>(reinterpret_cast<const T*>(krow + c * 16));
      float kf[E];
#pragma unroll
      for (int e = 0; e < E; ++e) kf[e] = to_f(kv.v[e]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4* qv = reinterpret_cast<const float4*>(q_sh + g * DP + c * E);
#pragma unroll
        for (int e4 = 0; e4 < E / 4; ++e4) {
          const float4 qq = qv[e4];
          s[g] += qq.x * kf[4 * e4] + qq.y * kf[4 * e4 + 1] + qq.z * kf[4 * e4 + 2] + qq.w * kf[4 * e4 + 3];
        }
      }
    }
    const bool valid = t0 + my_row < end;
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int o = LPR / 2; o > 0; o >>= 1) s[g] += __shfl_xor_sync(0xffffffffu, s[g], o);
      s[g] = valid ? s[g] : kNegInf;
    }
    // Online softmax over this warp's rows of the tile.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mt = s[g];
#pragma unroll
      for (int o = 16; o >= LPR; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
      const float m_new = fmaxf(m[g], mt);
      const float m_safe = m_new == kNegInf ? 0.f : m_new;
      const float alpha = exp_for<T>(m[g] - m_safe);
      const float p = exp_for<T>(s[g] - m_safe);
      m[g] = m_new;
      l[g] = l[g] * alpha + (sub == 0 ? p : 0.f);
#pragma unroll
      for (int e = 0; e < NPL; ++e) acc[g][e] *= alpha;
      if (sub == 0) p_sh[(warp * 32 + grp) * G + g] = p;
    }
    __syncwarp();
    // p * v over this warp's rows (stop at the end of the split: the rows
    // beyond it were not copied).
    const int64_t rows_here = end - (t0 + warp * RW);
    const int nrows = rows_here < RW ? static_cast<int>(rows_here > 0 ? rows_here : 0) : RW;
    for (int rr = 0; rr < nrows; ++rr) {
      const auto vv = load_vec<T, NPL>(reinterpret_cast<const T*>(vs + (warp * RW + rr) * TL::kRowStride) + lane * NPL);
      float pg[G];
#pragma unroll
      for (int g = 0; g < G; ++g) pg[g] = p_sh[(warp * 32 + rr) * G + g];
#pragma unroll
      for (int e = 0; e < NPL; ++e) {
        const float vf = to_f(vv.v[e]);
#pragma unroll
        for (int g = 0; g < G; ++g) acc[g][e] += pg[g] * vf;
      }
    }
    __syncthreads();  // this stage is overwritten by the next iteration's copy
  }
  cp_async_wait<0>();

  // Merge the warps: their states go to the (now idle) stage area.
  float* mo = reinterpret_cast<float*>(stages);  // [kWarps][G][DP]
  float* mm = mo + kWarps * G * DP;              // [kWarps][G] max
  float* ml = mm + kWarps * G;                   // [kWarps][G] sum
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float lw = l[g];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) lw += __shfl_xor_sync(0xffffffffu, lw, o);
#pragma unroll
    for (int e = 0; e < NPL; ++e) mo[(warp * G + g) * DP + lane * NPL + e] = acc[g][e];
    if (lane == 0) {
      mm[warp * G + g] = m[g];
      ml[warp * G + g] = lw;
    }
  }
  write_block_result<T, DP, G>(a, mo, mm, ml, nheads, b, h0, split, splits, partial_o, partial_ml);
}

// ------------------------------------------------------------ tensor cores
// For 16-bit caches (sm_80+, head_dim <= 128, 16-byte aligned rows) both
// products run on the tensor cores (mma.sync m16n8k16, float32 accumulate),
// which removes the scalar kernel's instruction bottleneck: the group's G <= 8
// query heads are the 16 rows of the A operand (rows G..15 zero), so
//   scores^T [head, row] = Q [head, d] . K^T [d, row]   (K tile via ldmatrix)
//   out [head, d]       += P [head, row] . V [row, d]     (V via ldmatrix.trans)
// and the scores' accumulator fragment is already the A fragment of P.

template <typename T> struct MmaOp;
template <> struct MmaOp<__nv_bfloat16> {
  __device__ __forceinline__ static void run(float c[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
#endif
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};
template <> struct MmaOp<__half> {
  __device__ __forceinline__ static void run(float c[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
#endif
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* smem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  }
#endif
}

// Fragment layout of m16n8k16 (lane = 4 * quad_row + quad_col): A holds
// rows quad_row (a0, a2) and quad_row + 8 (a1, a3, zero here), columns
// 2 * quad_col + {0, 1} (a0) and + 8 (a2); B holds k = 2 * quad_col + {0, 1}
// (b0) and + 8 (b1) of column quad_row; C holds row quad_row (c0, c1) and
// quad_row + 8 (c2, c3) at columns 2 * quad_col + {0, 1}.
//
// BULK (sm_90): tiles arrive by tensor copies counted on one mbarrier per
// stage, kBulkStages deep, unpadded and swizzled; otherwise by cp.async,
// kStages deep, into rows padded by 16 bytes.
template <bool BULK>
__host__ __device__ constexpr int mma_stages() {
  return BULK ? kBulkStages : kStages;
}

// Shared memory of the tensor-core kernel: the copy stages (which the warps'
// merge reuses), then one mbarrier per stage.
template <typename T, int DP, bool BULK>
__host__ __device__ constexpr int mma_stage_bytes() {
  return BULK ? 2 * Tiling<T, DP>::kTile * DP * static_cast<int>(sizeof(T)) : Tiling<T, DP>::kStageBytes;
}
template <typename T, int DP, int G, bool BULK>
__host__ __device__ constexpr int mma_stage_area_bytes() {
  constexpr int merge = static_cast<int>(sizeof(float)) * kWarps * G * (DP + 2);
  constexpr int stages = mma_stages<BULK>() * mma_stage_bytes<T, DP, BULK>();
  return ((stages > merge ? stages : merge) + 15) / 16 * 16;
}
// The swizzled boxes need 1024-byte alignment, which the dynamic shared
// memory base does not promise: 1 KB of slack.
template <typename T, int DP, int G, bool BULK>
__host__ __device__ constexpr int mma_smem_bytes() {
  return mma_stage_area_bytes<T, DP, G, BULK>() + 8 * mma_stages<BULK>() + (BULK ? 1024 : 0);
}

// Waits, in a kernel launched as a programmatic dependent, for the previous
// kernel of the stream to complete and its writes to be visible; a no-op
// otherwise.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

template <typename T, int DP, int G, bool BULK>
__global__ void __launch_bounds__(kThreads)
decode_attention_mma_kernel(kpdrDecodeAttentionArgs a, int splits, int64_t chunk, float* partial_o,
                            float* partial_ml, const __grid_constant__ TmaMaps maps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (BULK && __CUDA_ARCH__ < 900) {
    return;  // never launched: the host picks BULK only for sm_90+ kernel images
  } else {
  using TL = Tiling<T, DP>;
  using Op = MmaOp<T>;
  constexpr int TILE = TL::kTile, RW = TL::kRowsPerWarp, E = TL::kE, RS = TL::kRowStride;
  constexpr int KS = mma_stages<BULK>();
  constexpr int NS = RW / 8;   // score fragments (8 rows each) per warp and tile
  constexpr int KD = DP / 16;  // k steps over head_dim
  constexpr int NO = DP / 8;   // output fragments (8 columns each)
  static_assert(RW % 16 == 0 && G <= 8, "mma tiling");
  constexpr int SB = mma_stage_bytes<T, DP, BULK>();
  constexpr int BOX = TILE * 128;  // bytes of one 64-column box of a tile (BULK)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* stages = smem_raw;
  if constexpr (BULK) stages += (1024 - (smem_u32(smem_raw) & 1023)) & 1023;
  uint64_t* bars = reinterpret_cast<uint64_t*>(stages + mma_stage_area_bytes<T, DP, G, BULK>());

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int qr = lane >> 2, qc = lane & 3;  // quad row (head) and column
  // Launched as a programmatic dependent (sm_90), the block may start while
  // the previous kernel drains: only shared memory is touched before it
  // waits for that kernel's results. The barriers are initialised and every
  // stage's first tile is requested before anything else (the query loads,
  // the setup below), by the one thread that issues all copies.
  if constexpr (BULK) {
    if (tid == 0) {
      for (int st = 0; st < KS; ++st) mbar_init(bars + st, 1);
    }
  }
  grid_dependency_wait();
  const BlockWork w = block_work<G>(a, chunk);
  const int64_t b = w.b, kvh = w.kvh, h0 = w.h0, start = w.start, end = w.end;
  const int D = static_cast<int>(a.head_dim);
  const int64_t ntiles = end > start ? (end - start + TILE - 1) / TILE : 0;
  // Tensor copies of tile t0 into stage st, issued by one thread.
  auto bulk_tile = [&](int64_t t0, int st) {
    unsigned char* kst_base = stages + st * SB;
    mbar_arrive_expect(bars + st, SB);  // whole boxes, zero-filled ones included
#pragma unroll
    for (int box = 0; box < DP / 64; ++box) {
      tensor_copy(kst_base + box * BOX, &maps.k, box * 64, static_cast<int>(t0), static_cast<int>(w.kvh),
                  static_cast<int>(w.b), bars + st);
      tensor_copy(kst_base + (DP / 64 + box) * BOX, &maps.v, box * 64, static_cast<int>(t0),
                  static_cast<int>(w.kvh), static_cast<int>(w.b), bars + st);
    }
  };
  if constexpr (BULK) {
    if (tid == 0) {
      for (int st = 0; st < KS; ++st) {
        if (st < ntiles) bulk_tile(start + st * TILE, st);
      }
    }
  }

  // A fragments of this lane's head (row qr), unscaled: the scale is applied
  // to the float32 scores.
  uint32_t qa[KD][2];
  {
    const T* qp = static_cast<const T*>(a.q) + b * a.q_stride[0] + (h0 + qr) * a.q_stride[1];
    const bool head = qr < w.nheads;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int d = kk * 16 + half * 8 + 2 * qc;
        const float lo = head && d < D ? to_f(qp[d]) : 0.f;
        const float hi = head && d + 1 < D ? to_f(qp[d + 1]) : 0.f;
        qa[kk][half] = Op::pack(lo, hi);
      }
    }
  }
  // With BULK, columns beyond head_dim and rows beyond the cache are
  // zero-filled by the tensor copies.
  if (!BULK && D < DP) {
    for (int i = tid; i < KS * 2 * TILE * (DP - D); i += kThreads) {
      const int row = i / (DP - D), d = D + i % (DP - D);
      reinterpret_cast<T*>(stages + row * RS)[d] = from_f<T>(0.f);
    }
  }

  const T* kbase = static_cast<const T*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
  const T* vbase = static_cast<const T*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];
  const int64_t kst = a.k_stride[2], vst = a.v_stride[2];
  // cp.async: each thread copies chunk lc of rows lr, lr + kRowStep, ... of a
  // tile: consecutive threads cover consecutive 16 bytes of a row
  // (coalesced), and the per-tile address arithmetic is one multiply and
  // constant steps.
  constexpr int kRowStep = kThreads / TL::kChunks;
  static_assert(kThreads % TL::kChunks == 0 && TILE % kRowStep == 0, "copy mapping");
  const int lc = tid % TL::kChunks, lr = tid / TL::kChunks;
  const bool copies = lc < D / E;  // chunks beyond head_dim stay zero
  auto load_tile = [&](int64_t t0, int st) {
    unsigned char* kst_base = stages + st * SB;
    if constexpr (BULK) {
      if (tid == 0) bulk_tile(t0, st);
    } else {
      unsigned char* ks = kst_base + lr * RS + lc * 16;
      unsigned char* vs = ks + TILE * RS;
      const T* kp = kbase + (t0 + lr) * kst + lc * E;
      const T* vp = vbase + (t0 + lr) * vst + lc * E;
      if (!copies) return;
#pragma unroll
      for (int j = 0; j < TILE / kRowStep; ++j) {
        if (t0 + lr + j * kRowStep < end) {
          cp_async16(ks + j * kRowStep * RS, kp + j * kRowStep * kst);
          cp_async16(vs + j * kRowStep * RS, vp + j * kRowStep * vst);
        } else {
          *reinterpret_cast<uint4*>(vs + j * kRowStep * RS) = make_uint4(0, 0, 0, 0);
        }
      }
    }
  };

  // Online softmax state of head qr (log2 units), output fragments.
  constexpr float kLog2e = 1.4426950408889634f;
  const float scale2 = a.scale * kLog2e;
  float m = kNegInf, l = 0.f;
  float acc[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;

  __syncthreads();  // zeroed padding and initialised barriers before any copy
  if constexpr (!BULK) {
#pragma unroll
    for (int st = 0; st < KS - 1; ++st) {
      if (st < ntiles) load_tile(start + st * TILE, st);
      cp_async_commit();
    }
  }
  for (int64_t it = 0; it < ntiles; ++it) {
    const int64_t t0 = start + it * TILE;
    const int cur = static_cast<int>(it % KS);
    // Tile it + KS - 1 into the stage the previous iteration freed (with
    // BULK, issued at the start for it = 0).
    if (it + KS - 1 < ntiles && (!BULK || it > 0)) {
      load_tile(t0 + (KS - 1) * TILE, static_cast<int>((it + KS - 1) % KS));
    }
    if constexpr (BULK) {
      mbar_wait(bars + cur, static_cast<unsigned>((it / KS) & 1));
      if (t0 + TILE > end && end < a.cache_len) {
        // The last tile of a shorter sequence or of a split holds rows past
        // its end: probability 0, but 0 * (stale NaN) is NaN inside the
        // product, so zero those V rows (whole 128-byte box rows: the swizzle
        // only permutes chunks within a row).
        const int first = static_cast<int>(end - t0);
        unsigned char* vz = stages + cur * SB + (DP / 64) * BOX;
        for (int i = tid; i < (DP / 64) * (TILE - first) * 8; i += kThreads) {
          const int box = i / ((TILE - first) * 8), rest = i % ((TILE - first) * 8);
          reinterpret_cast<uint4*>(vz + box * BOX + (first + rest / 8) * 128)[rest % 8] = make_uint4(0, 0, 0, 0);
        }
        __syncthreads();
      }
    } else {
      cp_async_commit();
      cp_async_wait<KS - 1>();
      __syncthreads();
    }
    // Shared address of (tile row r, column col, a multiple of 8) of K or V.
    const unsigned char* kstage = stages + cur * SB;
    auto at = [&](bool v, int r, int col) -> const unsigned char* {
      if constexpr (BULK) {
        const int box = col >> 6, c = (col & 63) >> 3;
        return kstage + ((v ? DP / 64 : 0) + box) * BOX + r * 128 + ((c ^ (r & 7)) << 4);
      } else {
        return kstage + (v ? TILE * RS : 0) + r * RS + col * 2;
      }
    };
    const int wr = warp * RW;  // this warp's first row of the tile
    const int64_t row0 = t0 + warp * RW;  // cache row of this warp's first tile row

    // Scores: NS fragments of 8 rows.
    float sc[NS][2];
    float mt = kNegInf;
#pragma unroll
    for (int n = 0; n < NS; ++n) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int kk = 0; kk < KD; kk += 2) {
        uint32_t kb[4];  // b0, b1 of k step kk, then of kk + 1
        ldmatrix_x4<false>(kb, at(false, wr + n * 8 + (lane & 7), kk * 16 + (lane >> 3) * 8));
        Op::run(c, qa[kk][0], qa[kk][1], kb[0], kb[1]);
        Op::run(c, qa[kk + 1][0], qa[kk + 1][1], kb[2], kb[3]);
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = row0 + n * 8 + 2 * qc + e < end;
        sc[n][e] = valid ? c[e] * scale2 : kNegInf;
        mt = fmaxf(mt, sc[n][e]);
      }
    }
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
    const float m_new = fmaxf(m, mt);
    const float m_safe = m_new == kNegInf ? 0.f : m_new;
    const float alpha = exp2f(m - m_safe);
    m = m_new;
    l *= alpha;
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      acc[n][0] *= alpha;
      acc[n][1] *= alpha;
    }
    uint32_t pa[NS][1];
#pragma unroll
    for (int n = 0; n < NS; ++n) {
      const float p0 = exp2f(sc[n][0] - m_safe), p1 = exp2f(sc[n][1] - m_safe);
      l += p0 + p1;
      pa[n][0] = Op::pack(p0, p1);
    }
    // p * v: RW / 16 k steps of 16 rows.
#pragma unroll
    for (int kt = 0; kt < RW / 16; ++kt) {
#pragma unroll
      for (int n = 0; n < NO; n += 2) {
        uint32_t vb[4];  // b0, b1 of output fragment n, then of n + 1
        ldmatrix_x4<true>(vb, at(true, wr + kt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, n * 8 + (lane >> 4) * 8));
        Op::run(acc[n], pa[2 * kt][0], pa[2 * kt + 1][0], vb[0], vb[1]);
        Op::run(acc[n + 1], pa[2 * kt][0], pa[2 * kt + 1][0], vb[2], vb[3]);
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's copy
  }
  if constexpr (!BULK) cp_async_wait<0>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Let the combine kernel (launched as a programmatic dependent) start its
  // launch now; it still waits for this grid's completion before reading.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  float* mo = reinterpret_cast<float*>(stages);  // [kWarps][G][DP]
  float* mm = mo + kWarps * G * DP;              // [kWarps][G] max (natural log units)
  float* ml = mm + kWarps * G;                   // [kWarps][G] sum
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (qr < G) {
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      mo[(warp * G + qr) * DP + n * 8 + 2 * qc] = acc[n][0];
      mo[(warp * G + qr) * DP + n * 8 + 2 * qc + 1] = acc[n][1];
    }
    if (qc == 0) {
      mm[warp * G + qr] = m == kNegInf ? kNegInf : m * 0.6931471805599453f;
      ml[warp * G + qr] = l;
    }
  }
  write_block_result<T, DP, G>(a, mo, mm, ml, w.nheads, b, h0, w.split, splits, partial_o, partial_ml);
  }
#endif
}

// out[b, h] = sum_s exp(m_s - M) o_s / sum_s exp(m_s - M) l_s
//
// One block per (sequence, head), one thread per output column. Every load
// is issued before the first use (the splits' (m, l) into shared memory, up to
// kCombineRegs partial outputs per thread into registers), so the kernel costs
// one memory round trip after the attention kernel completes, not three.
constexpr int kCombineRegs = 16;
constexpr int kCombineMaxSplits = 256;
template <typename T>
__global__ void combine_kernel(kpdrDecodeAttentionArgs a, int splits, const float* partial_o,
                               const float* partial_ml) {
  __shared__ float sm[kCombineMaxSplits], sl[kCombineMaxSplits];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of the attention kernel: wait for
  // its completion (and its writes) before reading the partial results.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int64_t b = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const float* ml = partial_ml + (b * a.heads + h) * splits * 2;
  const float* po = partial_o + (b * a.heads + h) * splits * a.head_dim;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    sm[s] = ml[2 * s];
    sl[s] = ml[2 * s + 1];
  }
  const int64_t d = threadIdx.x;
  const bool col = d < a.head_dim;
  float o[kCombineRegs];
#pragma unroll
  for (int s = 0; s < kCombineRegs; ++s) o[s] = col && s < splits ? po[s * a.head_dim + d] : 0.f;
  __syncthreads();
  float big = kNegInf;
  for (int s = 0; s < splits; ++s) big = fmaxf(big, sm[s]);
  float num = 0.f, den = 0.f;
#pragma unroll
  for (int s = 0; s < kCombineRegs; ++s) {
    if (s < splits && sm[s] != kNegInf) {
      const float f = expf(sm[s] - big);
      den += f * sl[s];
      num += f * o[s];
    }
  }
  for (int s = kCombineRegs; s < splits; ++s) {
    if (sm[s] != kNegInf) {
      const float f = expf(sm[s] - big);
      den += f * sl[s];
      if (col) num += f * po[s * a.head_dim + d];
    }
  }
  if (col) {
    T* out = static_cast<T*>(a.out) + b * a.out_stride[0] + h * a.out_stride[1];
    out[d] = from_f<T>(den > 0.f ? num / den : 0.f);
  }
}

// Whether every K/V row starts on a 16-byte boundary and holds whole chunks.
template <typename T>
bool copies_async(const kpdrDecodeAttentionArgs& a) {
  constexpr int V = kVec16<T>;
  bool ok = a.head_dim % V == 0 && aligned(a.k, 16) && aligned(a.v, 16);
  for (int i = 0; i < 3; ++i) ok = ok && a.k_stride[i] % V == 0 && a.v_stride[i] % V == 0;
  return ok;
}

// Compute capability major of the current device (0 if unknown).
int device_major() {
  static int majors[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  if (majors[dev] == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return 0;
    majors[dev] = major;
  }
  return majors[dev];
}

// Whether the current device has the m16n8k16 tensor-core instructions (sm_80+).
bool has_mma() { return device_major() >= 8; }

// Whether `kernel` runs from an sm_90+ image on the current device: the
// bulk-copy kernel's body is empty when compiled for older architectures, so
// an extension built only for sm_80 must not pick it on an H100 either.
template <typename K>
bool runs_sm90_image(K kernel) {
  static int versions[64] = {0};
  int dev = 0;
  if (device_major() < 9 || cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  if (versions[dev] == 0) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) return false;
    versions[dev] = attr.binaryVersion;
  }
  return versions[dev] >= 90;
}

// cuTensorMapEncodeTiled from the driver, found once through the runtime (the
// extension does not link libcuda); null where the driver lacks it.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      p = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Tensor maps of the K and V caches, boxes of 64 columns x `tile` rows with
// the 128-byte swizzle; false where the driver cannot describe them (then the
// cp.async kernel runs). Host-only work, a few microseconds, no stream
// operation: allowed during graph capture, where the maps are captured with
// the kernel's parameters.
template <typename T>
bool encode_cache_maps(const kpdrDecodeAttentionArgs& a, int tile, TmaMaps* maps) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const CUtensorMapDataType type =
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  auto one = [&](CUtensorMap* map, const void* base, const int64_t* stride) {
    const cuuint64_t dims[4] = {static_cast<cuuint64_t>(a.head_dim), static_cast<cuuint64_t>(a.cache_len),
                                static_cast<cuuint64_t>(a.kv_heads), static_cast<cuuint64_t>(a.batch)};
    const cuuint64_t strides[3] = {static_cast<cuuint64_t>(stride[2]) * sizeof(T),
                                   static_cast<cuuint64_t>(stride[1]) * sizeof(T),
                                   static_cast<cuuint64_t>(stride[0]) * sizeof(T)};
    const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(tile), 1, 1};
    const cuuint32_t elem[4] = {1, 1, 1, 1};
    // L2 promotion: 128B measured as fast as none and 6-7% faster than 256B
    // (H200, T=16k/32k).
    return encode(map, type, 4, const_cast<void*>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  // Coordinates are 32-bit in the copy instruction.
  if (a.cache_len > INT32_MAX || a.batch > INT32_MAX || a.kv_heads > INT32_MAX) return false;
  return one(&maps->k, a.k, a.k_stride) && one(&maps->v, a.v, a.v_stride);
}

int heads_per_block(const kpdrDecodeAttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads;
  return group >= 8 ? 8 : group >= 4 ? 4 : group >= 2 ? 2 : 1;
}

int tile_rows(const kpdrDecodeAttentionArgs& a) {
  const int dp = padded_dim(a.head_dim);
  const int esize = a.dtype == KPDR_DTYPE_FLOAT32 ? 4 : 2;
  return dp == 0 ? 1 : 16384 / (dp * esize);
}

int choose_splits(const kpdrDecodeAttentionArgs& a, int requested) {
  const int64_t tile = tile_rows(a);
  const int64_t max_splits = std::max<int64_t>(1, ceil_div(a.cache_len, tile));
  int64_t s = requested;
  if (s <= 0) {
    const int64_t group = a.heads / a.kv_heads;
    const int64_t blocks = a.batch * a.kv_heads * ceil_div(group, heads_per_block(a));
    // About two blocks per multiprocessor, in one wave: measured on the H200
    // (B=8, Hkv=8, bf16), a partial second wave (e.g. 512 blocks where 396 are
    // resident) costs up to 25%, and more blocks per SM gain nothing. No split
    // shorter than a few tiles: combining would cost more than it gains.
    s = std::max<int64_t>(1, 2 * sm_count() / std::max<int64_t>(1, blocks));
    s = std::min<int64_t>(s, std::max<int64_t>(1, a.cache_len / (4 * tile)));
  }
  return static_cast<int>(std::min<int64_t>({s, max_splits, kCombineMaxSplits}));
}

template <typename T, int DP, int G, bool ASYNC>
cudaError_t launch(const kpdrDecodeAttentionArgs& a, int splits, void* ws, cudaStream_t stream) {
  using TL = Tiling<T, DP>;
  const int64_t chunk = ceil_div(ceil_div(a.cache_len, splits), TL::kTile) * TL::kTile;
  const int64_t group = a.heads / a.kv_heads;
  const dim3 grid(splits, static_cast<unsigned>(a.kv_heads * ceil_div(group, G)), static_cast<unsigned>(a.batch));
  float* po = static_cast<float*>(ws);
  float* pml = po == nullptr ? nullptr : po + a.batch * a.heads * splits * a.head_dim;
  const bool sm90 = device_major() >= 9;
  bool pdl = false;
  // Above 48 KB of dynamic shared memory a kernel must opt in (not a stream
  // operation: allowed during graph capture).
  auto run = [&](auto kernel, int smem, auto... extra) {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    const Launch launch(grid, dim3(kThreads), static_cast<size_t>(smem), stream, pdl);
    return cudaLaunchKernelEx(&launch.cfg, kernel, a, splits, chunk, po, pml, extra...);
  };
  cudaError_t err = cudaSuccess;
  bool done = false;
  if constexpr (sizeof(T) == 2 && DP <= 128 && ASYNC) {
    // The tensor-core kernels wait for the previous kernel in-kernel
    // (griddepcontrol.wait), so on sm_90 they launch as programmatic
    // dependents: their blocks are scheduled, and set up, while it drains.
    pdl = sm90;
    TmaMaps maps{};
    if (KP_DECODE_BULK && runs_sm90_image(decode_attention_mma_kernel<T, DP, G, true>) &&
        encode_cache_maps<T>(a, TL::kTile, &maps)) {
      err = run(decode_attention_mma_kernel<T, DP, G, true>, mma_smem_bytes<T, DP, G, true>(), maps);
      done = true;
    } else if (has_mma()) {
      err = run(decode_attention_mma_kernel<T, DP, G, false>, mma_smem_bytes<T, DP, G, false>(), maps);
      done = true;
    }
  }
  if (!done) {
    pdl = false;
    err = run(decode_attention_kernel<T, DP, G, ASYNC>, smem_bytes<T, DP, G>());
  }
  if (err != cudaSuccess) return err;
  if (splits > 1) {
    // On sm_90 the combine kernel is a programmatic dependent launch: its
    // blocks are scheduled while the attention kernel drains and wait
    // in-kernel for its results. Captured into CUDA graphs like any launch
    // (programmatic edges). It costs about 2.5 us per call at T=4k (H100 and
    // H200: the attention kernel alone vs both).
    const Launch launch(dim3(static_cast<unsigned>(a.batch * a.heads)),
                        dim3(static_cast<unsigned>(std::min<int64_t>(1024, ceil_div(a.head_dim, 32) * 32))), 0,
                        stream, sm90);
    return cudaLaunchKernelEx(&launch.cfg, combine_kernel<T>, a, splits, static_cast<const float*>(po),
                              static_cast<const float*>(pml));
  }
  return cudaGetLastError();
}

template <typename T, int DP, bool ASYNC>
cudaError_t launch_g(const kpdrDecodeAttentionArgs& a, int splits, void* ws, cudaStream_t stream) {
  switch (heads_per_block(a)) {
    case 8: return launch<T, DP, 8, ASYNC>(a, splits, ws, stream);
    case 4: return launch<T, DP, 4, ASYNC>(a, splits, ws, stream);
    case 2: return launch<T, DP, 2, ASYNC>(a, splits, ws, stream);
    default: return launch<T, DP, 1, ASYNC>(a, splits, ws, stream);
  }
}

template <typename T, bool ASYNC>
cudaError_t launch_d(const kpdrDecodeAttentionArgs& a, int splits, void* ws, cudaStream_t stream) {
  switch (padded_dim(a.head_dim)) {
    case 64: return launch_g<T, 64, ASYNC>(a, splits, ws, stream);
    case 128: return launch_g<T, 128, ASYNC>(a, splits, ws, stream);
    default: return launch_g<T, 256, ASYNC>(a, splits, ws, stream);
  }
}

}  // namespace

bool decode_attention_supported(const kpdrDecodeAttentionArgs& a) {
  return a.kv_heads > 0 && a.heads % a.kv_heads == 0 && padded_dim(a.head_dim) > 0;
}

ConfigList decode_attention_candidates(const kpdrDecodeAttentionArgs&) {
  ConfigList list;
  list.add(kThreads, 0);
  for (int s : {2, 4, 8, 12, 16, 24, 32, 48, 64}) list.add(kThreads, s);
  return list;
}

size_t decode_attention_workspace_bytes(const kpdrDecodeAttentionArgs& a, LaunchConfig cfg) {
  if (!decode_attention_supported(a)) return 0;
  const int splits = choose_splits(a, cfg.split);
  if (splits <= 1) return 0;
  return sizeof(float) * static_cast<size_t>(a.batch * a.heads * splits) * static_cast<size_t>(a.head_dim + 2);
}

cudaError_t decode_attention(const kpdrDecodeAttentionArgs& a, LaunchConfig cfg, void* workspace,
                             cudaStream_t stream) {
  if (a.batch * a.heads == 0 || a.head_dim == 0) return cudaSuccess;
  if (!decode_attention_supported(a)) return cudaErrorInvalidValue;
  const int splits = choose_splits(a, cfg.split);
  if (splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  return dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    return copies_async<T>(a) ? launch_d<T, true>(a, splits, workspace, stream)
                              : launch_d<T, false>(a, splits, workspace, stream);
  });
}

}  // namespace kp::cuda
