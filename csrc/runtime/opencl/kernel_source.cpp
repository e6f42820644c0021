// OpenCL C for the seven kernel-table entries (kpdr.h). One program per
// storage dtype (-DKP_DTYPE): float32 as float, float16 through the core
// vload_half/vstore_half (no cl_khr_fp16 needed: NVIDIA's OpenCL lacks it),
// bfloat16 as ushort widened to float. Arithmetic is float32 throughout.
// Every tensor arrives as (buffer, byte offset): the runtime's device
// pointers are translated to the cl_mem that holds them at launch.
#include "kernel_source.h"

namespace kpdr_opencl {

const char* const kKernelSource = R"CLC(
#define WG KP_WG
#define BUF(n) __global uchar* n##_b, ulong n##_o
#define AT(ty, n) ((__global ty*)(n##_b + n##_o))

#if KP_DTYPE == 0
typedef float T;
inline float ld(const __global float* p, long i) { return p[i]; }
inline void st(__global float* p, long i, float v) { p[i] = v; }
#elif KP_DTYPE == 1
typedef half T;
inline float ld(const __global half* p, long i) { return vload_half((size_t)i, p); }
inline void st(__global half* p, long i, float v) { vstore_half_rte(v, (size_t)i, p); }
#else
typedef ushort T;
inline float ld(const __global ushort* p, long i) { return as_float(((uint)p[i]) << 16); }
inline void st(__global ushort* p, long i, float v) {
  uint u = as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) { p[i] = (ushort)((u >> 16) | 0x40u); return; }  /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest even */
  p[i] = (ushort)(u >> 16);
}
#endif

/* Four consecutive elements at index i, as one vector access: i is a
 * multiple of 4 and the tensor's buffer offset a multiple of 4 elements
 * (ALIGNED), so the compiler may use one 16-byte (float32) or 8-byte
 * (16-bit types) load. vloadn would promise only element alignment, which
 * NVIDIA's compiler splits into scalar loads: 2-byte ones for bfloat16, a
 * quarter of a warp's bandwidth per instruction. */
#define ALIGNED(n) ((((n##_o)) & (4 * sizeof(T) - 1)) == 0)
#if KP_DTYPE == 0
inline float4 ld4(const __global float* p, long i) { return *(const __global float4*)(p + i); }
inline void st4(__global float* p, long i, float4 v) { *(__global float4*)(p + i) = v; }
#elif KP_DTYPE == 1
inline float4 ld4(const __global half* p, long i) { return vloada_half4((size_t)(i >> 2), p); }
inline void st4(__global half* p, long i, float4 v) { vstorea_half4_rte(v, (size_t)(i >> 2), p); }
#else
inline float4 ld4(const __global ushort* p, long i) {
  return as_float4(convert_uint4(*(const __global ushort4*)(p + i)) << 16);
}
inline void st4(__global ushort* p, long i, float4 v) {
  uint4 u = as_uint4(v);
  const uint4 rounded = (u + (uint4)(0x7fffu) + ((u >> 16) & (uint4)(1u))) >> 16;
  const uint4 nan = (u >> 16) | (uint4)(0x40u);
  u = select(rounded, nan, (u & (uint4)(0x7fffffffu)) > (uint4)(0x7f800000u));
  *(__global ushort4*)(p + i) = convert_ushort4(u);
}
#endif
/* float32 keeps the accurate exp; 16-bit outputs cannot see native_exp's
 * few-ulp error, and softmax/attention are exp-heavy. */
#if KP_DTYPE == 0
#define EXP exp
#else
#define EXP native_exp
#endif
inline float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* A tensor of any kpdrDtype (rope's cos/sin may differ from x). */
inline float ld_any(const __global uchar* p, long i, int dtype) {
  if (dtype == 0) return ((const __global float*)p)[i];
  if (dtype == 1) return vload_half((size_t)i, (const __global half*)p);
  return as_float(((uint)((const __global ushort*)p)[i]) << 16);
}

/* Aligned like ld4: i a multiple of 4, p aligned to 4 elements of dtype. */
inline float4 ld_any4(const __global uchar* p, long i, int dtype) {
  if (dtype == 0) return *((const __global float4*)p + (i >> 2));
  if (dtype == 1) return vloada_half4((size_t)(i >> 2), (const __global half*)p);
  return as_float4(convert_uint4(*((const __global ushort4*)p + (i >> 2))) << 16);
}
inline int dtype_bytes(int dtype) { return dtype == 0 ? 4 : 2; }

/* Work-group reductions in two barriers instead of log2(WG): 16 work-items
 * each fold WG / 16 values, then every work-item folds those 16. A third
 * barrier is not needed: the next call writes scratch[0, WG) only after its
 * callers all passed this call's second barrier, and scratch[WG, WG + 16)
 * only after its own first. scratch holds SCRATCH floats. */
#define RED_PARTS (WG < 16 ? WG : 16)
#define SCRATCH (WG + 16)
inline float wg_sum(float v, __local float* scratch) {
  const int lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < RED_PARTS) {
    float s = 0.0f;
    for (int i = lid; i < WG; i += RED_PARTS) s += scratch[i];
    scratch[WG + lid] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float r = 0.0f;
  for (int i = 0; i < RED_PARTS; ++i) r += scratch[WG + i];
  return r;
}

inline float wg_max(float v, __local float* scratch) {
  const int lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < RED_PARTS) {
    float s = -INFINITY;
    for (int i = lid; i < WG; i += RED_PARTS) s = fmax(s, scratch[i]);
    scratch[WG + lid] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float r = -INFINITY;
  for (int i = 0; i < RED_PARTS; ++i) r = fmax(r, scratch[WG + i]);
  return r;
}

/* One work-group per row; 4 elements per load where the row allows it. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_rms_norm(long cols, BUF(x), long xs, BUF(res), long rs, BUF(w), BUF(out), long os,
                 BUF(ro), long ros, float eps, BUF(rstd), int has_res, int has_rstd) {
  __local float scratch[SCRATCH];
  const long r = get_group_id(0);
  const int lid = get_local_id(0);
  const __global T* x = AT(T, x);
  const __global T* res = AT(T, res);
  const __global T* w = AT(T, w);
  __global T* out = AT(T, out);
  __global T* ro = AT(T, ro);
  const bool vec = ((cols | xs | os | (has_res ? (rs | ros) : 0)) & 3) == 0 && ALIGNED(x) && ALIGNED(w) &&
                   ALIGNED(out) && (!has_res || (ALIGNED(res) && ALIGNED(ro)));
  const long vcols = vec ? cols : 0;  /* [0, vcols) in vectors, the rest one by one */
  float ss = 0.0f;
  if (has_res) {
    for (long i = 4 * lid; i < vcols; i += 4 * WG) {
      st4(ro, r * ros + i, ld4(x, r * xs + i) + ld4(res, r * rs + i));
      const float4 s = ld4(ro, r * ros + i);  /* the rounded sum is what gets normalised */
      ss += sum4(s * s);
    }
    for (long i = vcols + lid; i < cols; i += WG) {
      st(ro, r * ros + i, ld(x, r * xs + i) + ld(res, r * rs + i));
      const float s = ld(ro, r * ros + i);
      ss += s * s;
    }
  } else {
    for (long i = 4 * lid; i < vcols; i += 4 * WG) {
      const float4 v = ld4(x, r * xs + i);
      ss += sum4(v * v);
    }
    for (long i = vcols + lid; i < cols; i += WG) {
      const float v = ld(x, r * xs + i);
      ss += v * v;
    }
  }
  const float inv = rsqrt(wg_sum(ss, scratch) / (float)cols + eps);
  if (has_rstd && lid == 0) AT(float, rstd)[r] = inv;
  const __global T* src = has_res ? (const __global T*)ro : x;
  const long src_stride = has_res ? ros : xs;
  for (long i = 4 * lid; i < vcols; i += 4 * WG) {
    st4(out, r * os + i, ld4(src, r * src_stride + i) * inv * ld4(w, i));
  }
  for (long i = vcols + lid; i < cols; i += WG) {
    st(out, r * os + i, ld(src, r * src_stride + i) * inv * ld(w, i));
  }
}

/* global (ceil(cols / 4) rounded up, rows): 4 elements per work-item. */
__kernel void kp_silu(long cols, BUF(x), long xs, BUF(out), long os, int gated) {
  const long i = 4 * get_global_id(0), r = get_global_id(1);
  if (i >= cols) return;
  const __global T* x = AT(T, x);
  __global T* out = AT(T, out);
  if (((cols | xs | os) & 3) == 0 && ALIGNED(x) && ALIGNED(out)) {
    const float4 v = ld4(x, r * xs + i);
    float4 s = v / (1.0f + exp(-v));
    if (gated) s *= ld4(x, r * xs + cols + i);
    st4(out, r * os + i, s);
    return;
  }
  for (long j = i; j < min(i + 4, cols); ++j) {
    const float v = ld(x, r * xs + j);
    float s = v / (1.0f + exp(-v));
    if (gated) s *= ld(x, r * xs + cols + j);
    st(out, r * os + j, s);
  }
}

/* Range (head x group of 4 rotation pairs, position, batch): neighbouring
 * work-items touch neighbouring bytes of a head, and the only division is by
 * the (small, 32-bit) number of groups per head: 64-bit division is a long
 * software routine on GPUs, and five of them per work-item cost bfloat16 rope
 * a third of its bandwidth on an H100. */
__kernel void kp_rope(long seq, long heads, long head_dim, BUF(x), long xs0, long xs1, long xs2,
                      BUF(out), long os0, long os1, long os2, BUF(cs), BUF(sn), int cs_dtype,
                      long csb, long css, int interleaved, int inverse) {
  const uint id = get_global_id(0);
  const uint half_dim = (uint)head_dim / 2, quads = (half_dim + 3) / 4;
  if (id >= quads * (uint)heads) return;
  const long i = 4 * (id % quads), h = id / quads, s = get_global_id(1), b = get_global_id(2);
  const long ci = b * csb + s * css + i;
  const float sign = inverse ? -1.0f : 1.0f;
  const __global T* x = AT(T, x);
  __global T* out = AT(T, out);
  const long xb = b * xs0 + s * xs1 + h * xs2, ob = b * os0 + s * os1 + h * os2;
  const int cs_align = 4 * dtype_bytes(cs_dtype) - 1;
  if (((half_dim | xb | ob | ci) & 3) == 0 && ALIGNED(x) && ALIGNED(out) && ((cs_o | sn_o) & cs_align) == 0) {
    const float4 c = ld_any4(cs_b + cs_o, ci, cs_dtype);
    const float4 sv = sign * ld_any4(sn_b + sn_o, ci, cs_dtype);
    if (interleaved) {
      const float4 v0 = ld4(x, xb + 2 * i), v1 = ld4(x, xb + 2 * i + 4);
      const float4 e = (float4)(v0.x, v0.z, v1.x, v1.z), o = (float4)(v0.y, v0.w, v1.y, v1.w);
      const float4 re = e * c - o * sv, ro = e * sv + o * c;
      st4(out, ob + 2 * i, (float4)(re.x, ro.x, re.y, ro.y));
      st4(out, ob + 2 * i + 4, (float4)(re.z, ro.z, re.w, ro.w));
    } else {
      const float4 x1 = ld4(x, xb + i), x2 = ld4(x, xb + half_dim + i);
      st4(out, ob + i, x1 * c - x2 * sv);
      st4(out, ob + half_dim + i, x1 * sv + x2 * c);
    }
    return;
  }
  for (long k = i; k < min(i + 4, (long)half_dim); ++k) {
    const long cj = ci + (k - i);
    const float c = ld_any(cs_b + cs_o, cj, cs_dtype);
    const float sv = sign * ld_any(sn_b + sn_o, cj, cs_dtype);
    const long i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half_dim;
    const float x1 = ld(x, xb + i1), x2 = ld(x, xb + i2);
    st(out, ob + i1, x1 * c - x2 * sv);
    st(out, ob + i2, x1 * sv + x2 * c);
  }
}

/* One work-group per row. Rows of up to 4 * WG * KP_ROW_VECS elements are
 * read once and kept in registers; longer ones are read twice (an online
 * max/sum pass, then the write pass). Every barrier (wg_max, wg_sum) is
 * reached by all work-items outside any branch, as OpenCL (and PoCL) need. */
#define KP_ROW_VECS 8
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_softmax(long cols, BUF(x), long xs, BUF(out), long os) {
  __local float scratch[SCRATCH];
  const long r = get_group_id(0);
  const int lid = get_local_id(0);
  const __global T* x = AT(T, x);
  __global T* out = AT(T, out);
  const long vcols = ((cols | xs | os) & 3) == 0 && ALIGNED(x) && ALIGNED(out) ? cols : 0;
  const bool in_registers = vcols > 0 && vcols <= 4 * WG * KP_ROW_VECS;
  float4 row[KP_ROW_VECS];
  float m = -INFINITY, s = 0.0f;  /* this work-item's max and (streamed) sum of exp(v - m) */
  if (in_registers) {
    #pragma unroll
    for (int k = 0; k < KP_ROW_VECS; ++k) {
      const long i = 4 * (lid + (long)k * WG);
      row[k] = i < vcols ? ld4(x, r * xs + i) : (float4)(-INFINITY);
      m = fmax(m, fmax(fmax(row[k].x, row[k].y), fmax(row[k].z, row[k].w)));
    }
  } else {
    for (long i = 4 * lid; i < vcols; i += 4 * WG) {
      const float4 v = ld4(x, r * xs + i);
      const float m_new = fmax(m, fmax(fmax(v.x, v.y), fmax(v.z, v.w)));
      if (m_new != -INFINITY) s = s * EXP(m - m_new) + sum4(EXP(v - m_new));
      m = m_new;
    }
    for (long i = vcols + lid; i < cols; i += WG) {
      const float v = ld(x, r * xs + i);
      const float m_new = fmax(m, v);
      if (m_new != -INFINITY) s = s * EXP(m - m_new) + EXP(v - m_new);
      m = m_new;
    }
  }
  float row_max = wg_max(m, scratch);
  if (isinf(row_max) && row_max < 0.0f) row_max = 0.0f;  /* all -inf: 0/0 = nan, like torch */
  float mine = 0.0f;
  if (in_registers) {
    #pragma unroll
    for (int k = 0; k < KP_ROW_VECS; ++k) {
      row[k] = EXP(row[k] - row_max);
      mine += sum4(row[k]);
    }
  } else if (m != -INFINITY) {
    mine = s * EXP(m - row_max);
  }
  const float inv = 1.0f / wg_sum(mine, scratch);
  if (in_registers) {
    #pragma unroll
    for (int k = 0; k < KP_ROW_VECS; ++k) {
      const long i = 4 * (lid + (long)k * WG);
      if (i < vcols) st4(out, r * os + i, row[k] * inv);
    }
  } else {
    for (long i = 4 * lid; i < vcols; i += 4 * WG) st4(out, r * os + i, EXP(ld4(x, r * xs + i) - row_max) * inv);
    for (long i = vcols + lid; i < cols; i += WG) st(out, r * os + i, EXP(ld(x, r * xs + i) - row_max) * inv);
  }
}

/* Attention of one query row against keys [j_begin, j_end) of one kv head,
 * online softmax over blocks of WG keys: each work-item scores one key of a
 * block; then the block's values are summed with float4 lanes over head_dim
 * and WG / (head_dim / 4) key groups (or one work-item per dimension when
 * head_dim or the strides are not multiples of 4). Needs head_dim <= WG.
 * part == 0: writes the normalised row to out[oo..]. Otherwise writes the
 * unnormalised partial result (m, l, acc[head_dim]) to part[po..], for
 * kp_attention_combine. Offsets are element indices into the base pointers;
 * kv_aligned / out_aligned say those base pointers are 4-element aligned. */
inline void attend(long j_begin, long j_end, long d, float scale, const __global T* q, long qo,
                   const __global T* k, long ko, long kstride, const __global T* v, long vo,
                   long vstride, __global T* out, long oo, __global float* part, long po,
                   bool kv_aligned, bool out_aligned, __local float* qv, __local float* p,
                   __local float* scratch, __local float* lanes) {
  const int lid = get_local_id(0);
  for (long c = lid; c < d; c += WG) qv[c] = ld(q, qo + c) * scale;
  barrier(CLK_LOCAL_MEM_FENCE);
  const bool vec = ((d | ko | kstride | vo | vstride) & 3) == 0 && kv_aligned;
  const long d4 = d / 4, groups = vec ? WG / d4 : 1;
  const long lane = vec ? lid % d4 : lid, group = vec ? lid / d4 : 0;
  const bool active = vec ? group < groups : lid < d;
  float m = -INFINITY, l = 0.0f, acc = 0.0f;
  float4 acc4 = (float4)(0.0f);
  for (long j0 = j_begin; j0 < j_end; j0 += WG) {
    const long j = j0 + lid;
    float score = -INFINITY;
    if (j < j_end) {
      score = 0.0f;
      const long kj = ko + j * kstride;
      long c = 0;
      if (vec) {
        for (; c < d; c += 4) score += dot(vload4(0, qv + c), ld4(k, kj + c));
      }
      for (; c < d; ++c) score += qv[c] * ld(k, kj + c);
    }
    const float m_new = fmax(m, wg_max(score, scratch));
    const float correction = (isinf(m) && m < 0.0f) ? 0.0f : EXP(m - m_new);
    const float e = j < j_end ? EXP(score - m_new) : 0.0f;
    p[lid] = e;
    l = l * correction + wg_sum(e, scratch);  /* its barriers also publish p */
    const long n = min((long)WG, j_end - j0);
    if (active) {
      if (vec) {
        acc4 *= correction;
        for (long jj = group; jj < n; jj += groups) acc4 += p[jj] * ld4(v, vo + (j0 + jj) * vstride + 4 * lane);
      } else {
        acc *= correction;
        for (long jj = 0; jj < n; ++jj) acc += p[jj] * ld(v, vo + (j0 + jj) * vstride + lane);
      }
    }
    m = m_new;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  /* Sum the key groups' lanes. The barrier is outside any branch: PoCL (and
   * the OpenCL spec) need every work-item to reach the same barriers. */
  vstore4(acc4, lid, lanes);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (vec) {
    if (lid < d4) {
      float4 total = (float4)(0.0f);
      for (long g = 0; g < groups; ++g) total += vload4(g * d4 + lid, lanes);
      if (part == 0) {
        const float4 o = l > 0.0f ? total / l : (float4)(0.0f);
        if ((oo & 3) == 0 && out_aligned) {
          st4(out, oo + 4 * lid, o);
        } else {
          st(out, oo + 4 * lid, o.x); st(out, oo + 4 * lid + 1, o.y);
          st(out, oo + 4 * lid + 2, o.z); st(out, oo + 4 * lid + 3, o.w);
        }
      } else {
        vstore4(total, 0, part + po + 2 + 4 * lid);
      }
    }
  } else if (active) {
    if (part == 0) st(out, oo + lane, l > 0.0f ? acc / l : 0.0f);
    else part[po + 2 + lane] = acc;
  }
  if (part != 0 && lid == 0) {
    part[po] = m;
    part[po + 1] = l;
  }
}

/* Work-groups (batch * heads, splits): split s covers cache positions
 * [s * chunk, (s + 1) * chunk). With one split the output is written
 * directly; otherwise partial results go to part for kp_attention_combine. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_decode_attention(long heads, long kv_heads, long cache_len, long d, BUF(q), long qs0,
                         long qs1, BUF(k), long ks0, long ks1, long ks2, BUF(v), long vs0,
                         long vs1, long vs2, BUF(lengths), int has_lengths, BUF(out), long os0,
                         long os1, float scale, BUF(part), long splits, long chunk) {
  __local float qv[WG], p[WG], scratch[SCRATCH];
  __local float lanes[4 * WG];
  const long g = get_group_id(0), split = get_group_id(1);
  const long b = g / heads, h = g % heads, kvh = h / (heads / kv_heads);
  const long len = has_lengths ? AT(long, lengths)[b] : cache_len;
  const long j_begin = split * chunk, j_end = min(len, j_begin + chunk);
  attend(j_begin, j_end, d, scale, AT(T, q), b * qs0 + h * qs1, AT(T, k), b * ks0 + kvh * ks1, ks2,
         AT(T, v), b * vs0 + kvh * vs1, vs2, AT(T, out), b * os0 + h * os1,
         splits > 1 ? AT(float, part) : (__global float*)0, (g * splits + split) * (d + 2),
         ALIGNED(k) && ALIGNED(v), ALIGNED(out), qv, p, scratch, lanes);
}

/* Decode attention, split over the cache ("flash decoding"): one work-group
 * per (batch, kv head, up to KP_MAXG of its query heads, split of the
 * cache), so each key and value row is read once for all the query heads
 * that share it, and a batch of one still fills the device.
 *
 * A key (and value) row is read by tpr = d / 8 neighbouring work-items (a
 * "team"), each holding 8 of its dims as two 4-vectors d / 2 apart: a warp's
 * load covers whole rows, coalesced. A block of bk keys is KP_KPT rows per
 * team. Each work-item's pieces of the block's dot products are summed
 * across its team, then it keeps its own online softmax over the keys it
 * loaded (running max, sum, 8 dims of the weighted values): no work-group
 * maximum per block. The next block's rows are loaded before this block is
 * computed, so they are in flight meanwhile. The work-group merges its teams
 * once at the end and writes the partial result (m, l, acc[d]) of each head
 * for kp_attention_combine, or with one split the output itself.
 *
 * The team sum: kp_decode_attention_shfl (where the compiler offers a warp
 * shuffle, KP_SHFL: NVIDIA; teams a power of two of work-items) sums with a
 * butterfly of shuffles in registers, so its main loop has no barrier and
 * every warp streams its rows on its own. kp_decode_attention_gqa sums in
 * local memory (two barriers per block): portable.
 *
 * Every work-group computes KP_MAXG heads (those past the group's are zero
 * queries, thrown away): no branches around loads or shuffles. On the H100
 * the kernel takes 190 registers a work-item (-cl-nv-verbose), so one
 * 256-wide work-group runs per compute unit: the host sizes the splits for
 * one wave of them.
 *
 * Scores are in base 2 (q is scaled by scale * log2(e)): exp2 is one
 * hardware instruction where exp is several; the partial maxima stay in
 * base 2 and kp_attention_combine is told so.
 *
 * Prefill runs here too: each query row i (seq_q of them, q stride qs2) is
 * one more work-group dimension, seeing keys [0, i + causal_shift] when
 * causal (bottom-right aligned). Decode is seq_q = 1, not causal.
 *
 * Needs d a multiple of 8, 16 <= d <= WG, and k and v rows 4-element
 * aligned (strides multiples of 4, aligned buffers); the host checks and
 * uses kp_decode_attention otherwise. */
#define KP_MAXG 4
/* Keys per work-item and block: 16-bit rows are half the bytes, so twice the
 * keys keep as many bytes in flight per work-item (they stay packed in
 * registers until used). */
#if KP_DTYPE == 0
#define KP_KPT 2
#define EXP2 exp2
typedef float4 V4;
inline float4 widen(float4 v) { return v; }
inline float4 ldv(const __global float* p) { return *(const __global float4*)p; }
#elif KP_DTYPE == 1
#define KP_KPT 4
#define EXP2 native_exp2
typedef float4 V4;  /* no half arithmetic without cl_khr_fp16: widened at the load */
inline float4 widen(float4 v) { return v; }
inline float4 ldv(const __global half* p) { return vloada_half4(0, p); }
#else
#define KP_KPT 4
#define EXP2 native_exp2
/* four bfloat16 as two words: a bfloat16 is the high half of a float, so each
 * widens with one shift or one mask */
typedef uint2 V4;
inline float4 widen(uint2 v) {
  return (float4)(as_float(v.x << 16), as_float(v.x & 0xffff0000u), as_float(v.y << 16), as_float(v.y & 0xffff0000u));
}
inline uint2 ldv(const __global ushort* p) { return *(const __global uint2*)p; }
#endif
#if defined(KP_SHFL)
/* v of the work-item whose lane in the warp is this one's xor m (m < 32). */
inline float xor_lane(float v, uint m) {
  uint r;
  __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(m));
  return as_float(r);
}
#endif
/* A team's block of rows: KP_KPT keys (a, b: the two halves of its dims) and values. */
typedef struct {
  V4 ka[KP_KPT], kb[KP_KPT], va[KP_KPT], vb[KP_KPT];
} Rows;
/* Rows j0 + team + kk * teams (kp, vp: row j0 + team); rows past j_end load
 * row j0 instead (no branch; the caller masks their scores). */
inline Rows load_rows(const __global T* kp, const __global T* vp, long j0, long j_end, int team, int teams,
                      long ks2, long vs2, int hoff) {
  Rows r;
  #pragma unroll
  for (int kk = 0; kk < KP_KPT; ++kk) {
    const long off = j0 + team + kk * teams < j_end ? (long)kk * teams : -(long)team;
    const __global T* k = kp + off * ks2;
    const __global T* v = vp + off * vs2;
    r.ka[kk] = ldv(k);
    r.kb[kk] = ldv(k + hoff);
    r.va[kk] = ldv(v);
    r.vb[kk] = ldv(v + hoff);
  }
  return r;
}
/* The body of both kernels; `shuffle` is a constant in each, so each keeps one team sum. */
inline void decode_attention_body(const bool shuffle, long heads, long kv_heads, long cache_len, long d,
                                  const __global T* q, long qs0, long qs1, const __global T* k, long ks0,
                                  long ks1, long ks2, const __global T* v, long vs0, long vs1, long vs2,
                                  const __global long* lengths, int has_lengths, float scale,
                                  __global float* part, long splits, long chunk, long head_chunks,
                                  long seq_q, long qs2, int causal, long causal_shift, __global T* out,
                                  long os0, long os1, long os2, __local float* red, __local float* sc,
                                  __local float4* qs) {
  const int lid = get_local_id(0);
  const int tpr = (int)(d / 8), teams = WG / tpr, bk = teams * KP_KPT;
  const int t = lid % tpr, team = min(lid / tpr, teams - 1);  /* spare work-items shadow the last team */
  const bool member = lid / tpr < teams;  /* WG need not be a multiple of tpr */
  const long wg = get_group_id(0), split = get_group_id(1);
  const long row = wg % seq_q, hc = (wg / seq_q) % head_chunks, bkv = wg / seq_q / head_chunks;
  const long b = bkv / kv_heads, kvh = bkv % kv_heads;
  const long group = heads / kv_heads;
  const long h0 = kvh * group + hc * KP_MAXG;
  const int G = (int)min((long)KP_MAXG, group - hc * KP_MAXG);
  long len = has_lengths ? lengths[b] : cache_len;
  if (causal) len = clamp(row + causal_shift + 1, 0L, len);
  const long j_begin = split * chunk, j_end = min(len, j_begin + chunk);
  const int d4 = (int)d / 4, c0 = t, c1 = t + d4 / 2;  /* in float4s */
  __local float* qf = (__local float*)qs;
  for (int c = lid; c < KP_MAXG * d; c += WG) {  /* q rows need no alignment; heads past G are zero */
    qf[c] = c / d < G ? ld(q, b * qs0 + (h0 + c / d) * qs1 + row * qs2 + c % d) * (scale * M_LOG2E_F) : 0.0f;
  }
  float4 acca[KP_MAXG], accb[KP_MAXG];
  float m[KP_MAXG], l[KP_MAXG];
  #pragma unroll
  for (int g = 0; g < KP_MAXG; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    acca[g] = accb[g] = (float4)(0.0f);
  }
  /* this work-item's first key and value row; every block moves them bk rows on */
  const __global T* kp = k + b * ks0 + kvh * ks1 + (j_begin + team) * ks2 + 4 * t;
  const __global T* vp = v + b * vs0 + kvh * vs1 + (j_begin + team) * vs2 + 4 * t;
  const int hoff = (int)d / 2;
  Rows cur;  /* the first block is in flight across the barrier that publishes q */
  if (j_begin < j_end) cur = load_rows(kp, vp, j_begin, j_end, team, teams, ks2, vs2, hoff);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (long j0 = j_begin; j0 < j_end; j0 += bk) {
    kp += bk * ks2;
    vp += bk * vs2;
    /* the next block, in flight while this one is computed */
    const Rows next = j0 + bk < j_end ? load_rows(kp, vp, j0 + bk, j_end, team, teams, ks2, vs2, hoff) : cur;
    float s[KP_MAXG][KP_KPT];  /* this work-item's piece of each score, then the score */
    #pragma unroll
    for (int g = 0; g < KP_MAXG; ++g) {
      const float4 qa = qs[g * d4 + c0], qb = qs[g * d4 + c1];
      #pragma unroll
      for (int kk = 0; kk < KP_KPT; ++kk) s[g][kk] = dot(qa, widen(cur.ka[kk])) + dot(qb, widen(cur.kb[kk]));
    }
    /* Without KP_SHFL the local-memory sum is not inside any branch: PoCL
     * needs barriers outside branches (see "Caveats" in the docs). */
#if defined(KP_SHFL)
    if (shuffle) {
      for (uint mask = (uint)tpr >> 1; mask > 0; mask >>= 1) {
        #pragma unroll
        for (int g = 0; g < KP_MAXG; ++g) {
          #pragma unroll
          for (int kk = 0; kk < KP_KPT; ++kk) s[g][kk] += xor_lane(s[g][kk], mask);
        }
      }
    } else
#endif
    {
      if (member) {
        #pragma unroll
        for (int g = 0; g < KP_MAXG; ++g) {
          #pragma unroll
          for (int kk = 0; kk < KP_KPT; ++kk) {
            if (g < G) red[(g * bk + kk * teams + team) * (tpr + 1) + t] = s[g][kk];
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int i = lid; i < G * bk; i += WG) {
        float sum = 0.0f;
        for (int p = 0; p < tpr; ++p) sum += red[i * (tpr + 1) + p];
        sc[i] = sum;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      #pragma unroll
      for (int g = 0; g < KP_MAXG; ++g) {
        #pragma unroll
        for (int kk = 0; kk < KP_KPT; ++kk) s[g][kk] = g < G ? sc[g * bk + kk * teams + team] : 0.0f;
      }
      /* the next block's writes to red come after every read here: its
       * first barrier separates them from this block's second */
    }
    #pragma unroll
    for (int g = 0; g < KP_MAXG; ++g) {
      float mx = m[g];
      #pragma unroll
      for (int kk = 0; kk < KP_KPT; ++kk) {
        if (j0 + team + kk * teams >= j_end) s[g][kk] = -INFINITY;
        mx = fmax(mx, s[g][kk]);
      }
      if (mx != -INFINITY) {
        const float correction = EXP2(m[g] - mx);  /* 0 while m is -inf */
        float lsum = l[g] * correction;
        float4 a = acca[g] * correction, c = accb[g] * correction;
        #pragma unroll
        for (int kk = 0; kk < KP_KPT; ++kk) {
          const float p = EXP2(s[g][kk] - mx);
          lsum += p;
          a += p * widen(cur.va[kk]);
          c += p * widen(cur.vb[kk]);
        }
        m[g] = mx;
        l[g] = lsum;
        acca[g] = a;
        accb[g] = c;
      }
    }
    cur = next;
  }
  barrier(CLK_LOCAL_MEM_FENCE);  /* red and sc are reused below: every team is done with them */
  /* per head: rescale every team to the work-group's maximum and sum them */
  for (int g = 0; g < G; ++g) {
    if (member && t == 0) sc[team] = m[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    float mg = -INFINITY;
    for (int i = 0; i < teams; ++i) mg = fmax(mg, sc[i]);
    const float f = (member && m[g] != -INFINITY) ? EXP2(m[g] - mg) : 0.0f;
    if (member) {
      vstore4(acca[g] * f, 0, red + team * d + 4 * c0);
      vstore4(accb[g] * f, 0, red + team * d + 4 * c1);
      if (t == 0) red[teams * d + team] = l[g] * f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float total = 0.0f;
    for (int i = 0; i < teams; ++i) total += red[teams * d + i];
    if (splits == 1) {  /* the whole row: normalised output, no merge kernel */
      const long oo = b * os0 + (h0 + g) * os1 + row * os2;
      for (long c = lid; c < d; c += WG) {
        float o = 0.0f;
        for (int i = 0; i < teams; ++i) o += red[i * d + c];
        st(out, oo + c, total > 0.0f ? o / total : 0.0f);
      }
    } else {
      const long po = (((b * heads + h0 + g) * seq_q + row) * splits + split) * (d + 2);
      for (long c = lid; c < d; c += WG) {
        float o = 0.0f;
        for (int i = 0; i < teams; ++i) o += red[i * d + c];
        part[po + 2 + c] = o;
      }
      if (lid == 0) {
        part[po] = mg;  /* base 2 */
        part[po + 1] = total;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
#define KP_DECODE_ATTENTION_ARGS \
    long heads, long kv_heads, long cache_len, long d, BUF(q), long qs0, long qs1, BUF(k), long ks0, \
    long ks1, long ks2, BUF(v), long vs0, long vs1, long vs2, BUF(lengths), int has_lengths, float scale, \
    BUF(part), long splits, long chunk, long head_chunks, long seq_q, long qs2, int causal, \
    long causal_shift, BUF(out), long os0, long os1, long os2
/* red: the dot products' pieces, one row of tpr + 1 floats (odd: no bank
 * conflicts when summed) per (head, key), tpr >= 2 (rows of tpr + 1 <= 3 tpr
 * / 2); at the end the teams' values. sc: the block's scores; at the end the
 * teams' maxima. qs: q * scale * log2(e), [head][dim] (the host keeps d <= WG). */
#define KP_DECODE_ATTENTION_CALL(shuffle) \
  __local float red[3 * KP_MAXG * KP_KPT * WG / 2]; \
  __local float sc[KP_MAXG * KP_KPT * WG / 2]; \
  __local float4 qs[KP_MAXG * WG / 4]; \
  decode_attention_body(shuffle, heads, kv_heads, cache_len, d, AT(T, q), qs0, qs1, AT(T, k), ks0, ks1, ks2, \
                        AT(T, v), vs0, vs1, vs2, AT(long, lengths), has_lengths, scale, AT(float, part), splits, \
                        chunk, head_chunks, seq_q, qs2, causal, causal_shift, AT(T, out), os0, os1, os2, red, sc, qs)
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_decode_attention_gqa(KP_DECODE_ATTENTION_ARGS) {
  KP_DECODE_ATTENTION_CALL(false);
}
#if defined(KP_SHFL)
/* Needs tpr = d / 8 a power of two up to 32 (teams inside a warp of 32). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_decode_attention_shfl(KP_DECODE_ATTENTION_ARGS) {
  KP_DECODE_ATTENTION_CALL(true);
}
#endif

/* One work-group per (batch, head, query row): merges the splits' partial results.
 * Each split's weight exp(m_s - m) is computed once, into local memory, for
 * a tile of WG splits at a time; base2: the maxima m_s are base-2 logarithms
 * (kp_decode_attention_gqa), so the weight is exp2(m_s - m). Needs d <= WG. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_attention_combine(long heads, long d, long splits, BUF(part), BUF(out), long os0, long os1,
                          long seq_q, long os2, int base2) {
  __local float scratch[SCRATCH], w[WG];
  const int lid = get_local_id(0);
  const long g = get_group_id(0);
  const long row = g % seq_q, b = g / seq_q / heads, h = (g / seq_q) % heads;
  const __global float* part = AT(float, part) + g * splits * (d + 2);
  float m = -INFINITY;
  for (long s = lid; s < splits; s += WG) m = fmax(m, part[s * (d + 2)]);
  m = wg_max(m, scratch);
  float l = 0.0f;
  for (long s = lid; s < splits; s += WG) {
    const float ms = part[s * (d + 2)];
    if (ms != -INFINITY) l += part[s * (d + 2) + 1] * (base2 ? EXP2(ms - m) : EXP(ms - m));
  }
  l = wg_sum(l, scratch);
  float o = 0.0f;
  for (long s0 = 0; s0 < splits; s0 += WG) {
    const float ms = s0 + lid < splits ? part[(s0 + lid) * (d + 2)] : -INFINITY;
    w[lid] = ms != -INFINITY ? (base2 ? EXP2(ms - m) : EXP(ms - m)) : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    const long n = min((long)WG, splits - s0);
    if (lid < d) {
      for (long i = 0; i < n; ++i) o += w[i] * part[(s0 + i) * (d + 2) + 2 + lid];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid < d) st(AT(T, out), b * os0 + h * os1 + row * os2 + lid, l > 0.0f ? o / l : 0.0f);
}

/* One work-group per (batch, head, query position). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_prefill_attention(long heads, long kv_heads, long seq_q, long seq_kv, long d, BUF(q),
                          long qs0, long qs1, long qs2, BUF(k), long ks0, long ks1, long ks2,
                          BUF(v), long vs0, long vs1, long vs2, BUF(out), long os0, long os1,
                          long os2, float scale, int causal) {
  __local float qv[WG], p[WG], scratch[SCRATCH];
  __local float lanes[4 * WG];
  const long g = get_group_id(0);
  const long i = g % seq_q, bh = g / seq_q;
  const long b = bh / heads, h = bh % heads, kvh = h / (heads / kv_heads);
  /* bottom-right aligned causal mask: key j is visible when j <= i + (seq_kv - seq_q) */
  const long len = causal ? clamp(i + (seq_kv - seq_q) + 1, 0L, seq_kv) : seq_kv;
  attend(0, len, d, scale, AT(T, q), b * qs0 + h * qs1 + i * qs2, AT(T, k), b * ks0 + kvh * ks1,
         ks2, AT(T, v), b * vs0 + kvh * vs1, vs2, AT(T, out), b * os0 + h * os1 + i * os2,
         (__global float*)0, 0, ALIGNED(k) && ALIGNED(v), ALIGNED(out), qv, p, scratch, lanes);
}

/* One work-group per output row. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_matmul_vec(long k, BUF(w), long ws, BUF(x), BUF(out)) {
  __local float scratch[SCRATCH];
  const long n = get_group_id(0);
  const int lid = get_local_id(0);
  const __global T* w = AT(T, w);
  const __global T* x = AT(T, x);
  float s = 0.0f;
  const long vk = ((k | ws) & 3) == 0 && ALIGNED(w) && ALIGNED(x) ? k : 0;
  for (long i = 4 * lid; i < vk; i += 4 * WG) s += dot(ld4(w, n * ws + i), ld4(x, i));
  for (long i = vk + lid; i < k; i += WG) s += ld(w, n * ws + i) * ld(x, i);
  s = wg_sum(s, scratch);
  if (lid == 0) st(AT(T, out), n, s);
}
)CLC";

}  // namespace kpdr_opencl
