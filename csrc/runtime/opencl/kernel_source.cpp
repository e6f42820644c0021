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

/* Four consecutive elements at index i (a multiple of 4 from the base
 * pointer; vloadn needs only element alignment). 16 bytes of float32 or 8 of
 * 16-bit types per load keep enough bytes in flight on GPUs. */
#if KP_DTYPE == 0
inline float4 ld4(const __global float* p, long i) { return vload4((size_t)(i >> 2), p); }
inline void st4(__global float* p, long i, float4 v) { vstore4(v, (size_t)(i >> 2), p); }
#elif KP_DTYPE == 1
inline float4 ld4(const __global half* p, long i) { return vload_half4((size_t)(i >> 2), p); }
inline void st4(__global half* p, long i, float4 v) { vstore_half4_rte(v, (size_t)(i >> 2), p); }
#else
inline float4 ld4(const __global ushort* p, long i) {
  return as_float4(convert_uint4(vload4((size_t)(i >> 2), p)) << 16);
}
inline void st4(__global ushort* p, long i, float4 v) {
  uint4 u = as_uint4(v);
  const uint4 rounded = (u + (uint4)(0x7fffu) + ((u >> 16) & (uint4)(1u))) >> 16;
  const uint4 nan = (u >> 16) | (uint4)(0x40u);
  u = select(rounded, nan, (u & (uint4)(0x7fffffffu)) > (uint4)(0x7f800000u));
  vstore4(convert_ushort4(u), (size_t)(i >> 2), p);
}
#endif
inline float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* A tensor of any kpdrDtype (rope's cos/sin may differ from x). */
inline float ld_any(const __global uchar* p, long i, int dtype) {
  if (dtype == 0) return ((const __global float*)p)[i];
  if (dtype == 1) return vload_half((size_t)i, (const __global half*)p);
  return as_float(((uint)((const __global ushort*)p)[i]) << 16);
}

inline float wg_sum(float v, __local float* scratch) {
  const int lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

inline float wg_max(float v, __local float* scratch) {
  const int lid = get_local_id(0);
  scratch[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] = fmax(scratch[lid], scratch[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* One work-group per row; 4 elements per load where the row allows it. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_rms_norm(long cols, BUF(x), long xs, BUF(res), long rs, BUF(w), BUF(out), long os,
                 BUF(ro), long ros, float eps, BUF(rstd), int has_res, int has_rstd) {
  __local float scratch[WG];
  const long r = get_group_id(0);
  const int lid = get_local_id(0);
  const __global T* x = AT(T, x);
  const __global T* res = AT(T, res);
  const __global T* w = AT(T, w);
  __global T* out = AT(T, out);
  __global T* ro = AT(T, ro);
  const bool vec = ((cols | xs | os | (has_res ? (rs | ros) : 0)) & 3) == 0;
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
  if (((cols | xs | os) & 3) == 0) {
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

/* global (head_dim / 2, heads, batch * seq). */
__kernel void kp_rope(long seq, long head_dim, BUF(x), long xs0, long xs1, long xs2, BUF(out),
                      long os0, long os1, long os2, BUF(cs), BUF(sn), int cs_dtype, long csb,
                      long css, int interleaved, int inverse) {
  const long i = get_global_id(0), h = get_global_id(1), p = get_global_id(2);
  const long half_dim = head_dim / 2;
  const long b = p / seq, s = p % seq;
  const long ci = b * csb + s * css + i;
  const float c = ld_any(cs_b + cs_o, ci, cs_dtype);
  const float sv = (inverse ? -1.0f : 1.0f) * ld_any(sn_b + sn_o, ci, cs_dtype);
  const long i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half_dim;
  const __global T* x = AT(T, x);
  __global T* out = AT(T, out);
  const long xb = b * xs0 + s * xs1 + h * xs2, ob = b * os0 + s * os1 + h * os2;
  const float x1 = ld(x, xb + i1), x2 = ld(x, xb + i2);
  st(out, ob + i1, x1 * c - x2 * sv);
  st(out, ob + i2, x1 * sv + x2 * c);
}

/* One work-group per row: an online max/sum pass, then the write pass. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_softmax(long cols, BUF(x), long xs, BUF(out), long os) {
  __local float scratch[WG];
  const long r = get_group_id(0);
  const int lid = get_local_id(0);
  const __global T* x = AT(T, x);
  __global T* out = AT(T, out);
  const long vcols = ((cols | xs | os) & 3) == 0 ? cols : 0;
  float m = -INFINITY, s = 0.0f;  /* this work-item's running max and sum of exp(v - m) */
  for (long i = 4 * lid; i < vcols; i += 4 * WG) {
    const float4 v = ld4(x, r * xs + i);
    const float m_new = fmax(m, fmax(fmax(v.x, v.y), fmax(v.z, v.w)));
    if (m_new != -INFINITY) s = s * exp(m - m_new) + sum4(exp(v - m_new));
    m = m_new;
  }
  for (long i = vcols + lid; i < cols; i += WG) {
    const float v = ld(x, r * xs + i);
    const float m_new = fmax(m, v);
    if (m_new != -INFINITY) s = s * exp(m - m_new) + exp(v - m_new);
    m = m_new;
  }
  float row_max = wg_max(m, scratch);
  if (isinf(row_max) && row_max < 0.0f) row_max = 0.0f;  /* all -inf: 0/0 = nan, like torch */
  const float mine = (m == -INFINITY) ? 0.0f : s * exp(m - row_max);
  const float inv = 1.0f / wg_sum(mine, scratch);
  for (long i = 4 * lid; i < vcols; i += 4 * WG) st4(out, r * os + i, exp(ld4(x, r * xs + i) - row_max) * inv);
  for (long i = vcols + lid; i < cols; i += WG) st(out, r * os + i, exp(ld(x, r * xs + i) - row_max) * inv);
}

/* Attention of one query row against keys [0, len) of one kv head, online
 * softmax over blocks of WG keys: each work-item scores one key of a block,
 * then work-item c accumulates output dimension c. Needs head_dim <= WG.
 * Offsets are element indices into the base pointers. */
inline void attend_row(long len, long d, float scale, const __global T* q, long qo,
                       const __global T* k, long ko, long kstride,
                       const __global T* v, long vo, long vstride, __global T* out, long oo,
                       __local float* qv, __local float* p, __local float* scratch) {
  const int lid = get_local_id(0);
  for (long c = lid; c < d; c += WG) qv[c] = ld(q, qo + c) * scale;
  barrier(CLK_LOCAL_MEM_FENCE);
  float m = -INFINITY, l = 0.0f, acc = 0.0f;
  for (long j0 = 0; j0 < len; j0 += WG) {
    const long j = j0 + lid;
    float score = -INFINITY;
    if (j < len) {
      score = 0.0f;
      const long kj = ko + j * kstride;
      long c = 0;
      if (((kj | d) & 3) == 0) {
        for (; c < d; c += 4) score += dot(vload4(0, qv + c), ld4(k, kj + c));
      }
      for (; c < d; ++c) score += qv[c] * ld(k, kj + c);
    }
    const float m_new = fmax(m, wg_max(score, scratch));
    const float correction = (isinf(m) && m < 0.0f) ? 0.0f : exp(m - m_new);
    const float e = j < len ? exp(score - m_new) : 0.0f;
    p[lid] = e;
    l = l * correction + wg_sum(e, scratch);  /* its barriers also publish p */
    const long n = min((long)WG, len - j0);
    if (lid < d) {
      acc *= correction;
      for (long jj = 0; jj < n; ++jj) acc += p[jj] * ld(v, vo + (j0 + jj) * vstride + lid);
    }
    m = m_new;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid < d) st(out, oo + lid, l > 0.0f ? acc / l : 0.0f);
}

/* One work-group per (batch, head). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_decode_attention(long heads, long kv_heads, long cache_len, long d, BUF(q), long qs0,
                         long qs1, BUF(k), long ks0, long ks1, long ks2, BUF(v), long vs0,
                         long vs1, long vs2, BUF(lengths), int has_lengths, BUF(out), long os0,
                         long os1, float scale) {
  __local float qv[WG], p[WG], scratch[WG];
  const long g = get_group_id(0);
  const long b = g / heads, h = g % heads, kvh = h / (heads / kv_heads);
  const long len = has_lengths ? AT(long, lengths)[b] : cache_len;
  attend_row(len, d, scale, AT(T, q), b * qs0 + h * qs1, AT(T, k), b * ks0 + kvh * ks1, ks2,
             AT(T, v), b * vs0 + kvh * vs1, vs2, AT(T, out), b * os0 + h * os1, qv, p, scratch);
}

/* One work-group per (batch, head, query position). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_prefill_attention(long heads, long kv_heads, long seq_q, long seq_kv, long d, BUF(q),
                          long qs0, long qs1, long qs2, BUF(k), long ks0, long ks1, long ks2,
                          BUF(v), long vs0, long vs1, long vs2, BUF(out), long os0, long os1,
                          long os2, float scale, int causal) {
  __local float qv[WG], p[WG], scratch[WG];
  const long g = get_group_id(0);
  const long i = g % seq_q, bh = g / seq_q;
  const long b = bh / heads, h = bh % heads, kvh = h / (heads / kv_heads);
  /* bottom-right aligned causal mask: key j is visible when j <= i + (seq_kv - seq_q) */
  const long len = causal ? clamp(i + (seq_kv - seq_q) + 1, 0L, seq_kv) : seq_kv;
  attend_row(len, d, scale, AT(T, q), b * qs0 + h * qs1 + i * qs2, AT(T, k), b * ks0 + kvh * ks1,
             ks2, AT(T, v), b * vs0 + kvh * vs1, vs2, AT(T, out), b * os0 + h * os1 + i * os2,
             qv, p, scratch);
}

/* One work-group per output row. */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void kp_matmul_vec(long k, BUF(w), long ws, BUF(x), BUF(out)) {
  __local float scratch[WG];
  const long n = get_group_id(0);
  const int lid = get_local_id(0);
  const __global T* w = AT(T, w);
  const __global T* x = AT(T, x);
  float s = 0.0f;
  const long vk = ((k | ws) & 3) == 0 ? k : 0;
  for (long i = 4 * lid; i < vk; i += 4 * WG) s += dot(ld4(w, n * ws + i), ld4(x, i));
  for (long i = vk + lid; i < k; i += WG) s += ld(w, n * ws + i) * ld(x, i);
  s = wg_sum(s, scratch);
  if (lid == 0) st(AT(T, out), n, s);
}
)CLC";

}  // namespace kpdr_opencl
