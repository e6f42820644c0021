// decode_attention and prefill_attention: the online softmax over blocks of
// keys, flash-decoding splits for decode, AVX512-BF16 dot products for
// bfloat16 prefill.
#pragma once

#include "kernels/cpu/common.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

// Both attention kernels keep, per query row, the running maximum m, the sum l
// of exp(score - m) and the output accumulator o (the online softmax), and
// work on blocks of keys converted to float once per block.

constexpr int64_t kKeyBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// o[r] += sum_j p[r][j] * v[j] for rows r < rows, j < keys; o rows hold d floats.
// Register tile: 4 rows x 2 vectors of o (named accumulators, so they stay in
// registers), streaming the keys.
inline void accumulate_pv(float* o, int64_t rows, const float* p, int64_t p_stride,
                          const float* v, int64_t keys, int64_t d) {
  int64_t c = 0;
  for (; c + 2 * W <= d; c += 2 * W) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      float* o0 = o + r * d + c;
      float* o1 = o0 + d;
      float* o2 = o1 + d;
      float* o3 = o2 + d;
      const float* p0 = p + r * p_stride;
      const float* p1 = p0 + p_stride;
      const float* p2 = p1 + p_stride;
      const float* p3 = p2 + p_stride;
      Vec a00 = Vec::load(o0), a01 = Vec::load(o0 + W), a10 = Vec::load(o1), a11 = Vec::load(o1 + W);
      Vec a20 = Vec::load(o2), a21 = Vec::load(o2 + W), a30 = Vec::load(o3), a31 = Vec::load(o3 + W);
      for (int64_t j = 0; j < keys; ++j) {
        const Vec v0 = Vec::load(v + j * d + c), v1 = Vec::load(v + j * d + c + W);
        Vec pj = Vec::set1(p0[j]);
        a00 = Vec::fmadd(pj, v0, a00); a01 = Vec::fmadd(pj, v1, a01);
        pj = Vec::set1(p1[j]);
        a10 = Vec::fmadd(pj, v0, a10); a11 = Vec::fmadd(pj, v1, a11);
        pj = Vec::set1(p2[j]);
        a20 = Vec::fmadd(pj, v0, a20); a21 = Vec::fmadd(pj, v1, a21);
        pj = Vec::set1(p3[j]);
        a30 = Vec::fmadd(pj, v0, a30); a31 = Vec::fmadd(pj, v1, a31);
      }
      a00.store(o0); a01.store(o0 + W); a10.store(o1); a11.store(o1 + W);
      a20.store(o2); a21.store(o2 + W); a30.store(o3); a31.store(o3 + W);
    }
    for (; r < rows; ++r) {
      Vec a0 = Vec::load(o + r * d + c), a1 = Vec::load(o + r * d + c + W);
      for (int64_t j = 0; j < keys; ++j) {
        Vec pj = Vec::set1(p[r * p_stride + j]);
        a0 = Vec::fmadd(pj, Vec::load(v + j * d + c), a0);
        a1 = Vec::fmadd(pj, Vec::load(v + j * d + c + W), a1);
      }
      a0.store(o + r * d + c);
      a1.store(o + r * d + c + W);
    }
  }
  // One vector of o per row: head sizes below 2 * W (16 with AVX-512) would
  // otherwise all take the scalar loop below.
  for (; c + W <= d; c += W) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      float* o0 = o + r * d + c;
      const float* p0 = p + r * p_stride;
      Vec a0 = Vec::load(o0), a1 = Vec::load(o0 + d), a2 = Vec::load(o0 + 2 * d), a3 = Vec::load(o0 + 3 * d);
      for (int64_t j = 0; j < keys; ++j) {
        const Vec vj = Vec::load(v + j * d + c);
        a0 = Vec::fmadd(Vec::set1(p0[j]), vj, a0);
        a1 = Vec::fmadd(Vec::set1(p0[p_stride + j]), vj, a1);
        a2 = Vec::fmadd(Vec::set1(p0[2 * p_stride + j]), vj, a2);
        a3 = Vec::fmadd(Vec::set1(p0[3 * p_stride + j]), vj, a3);
      }
      a0.store(o0); a1.store(o0 + d); a2.store(o0 + 2 * d); a3.store(o0 + 3 * d);
    }
    for (; r < rows; ++r) {
      Vec a = Vec::load(o + r * d + c);
      for (int64_t j = 0; j < keys; ++j) a = Vec::fmadd(Vec::set1(p[r * p_stride + j]), Vec::load(v + j * d + c), a);
      a.store(o + r * d + c);
    }
  }
  for (; c < d; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      float acc = o[r * d + c];
      for (int64_t j = 0; j < keys; ++j) acc += p[r * p_stride + j] * v[j * d + c];
      o[r * d + c] = acc;
    }
  }
}

// s[r][j] = q[r] . k[j] for rows r < rows, keys j < keys, with kt the keys
// transposed ([d][key_stride] floats) so the inner loop is an outer product.
// Register tile: 4 rows x 2 vectors of keys, in named accumulators.
inline void scores_qk(float* s, int64_t s_stride, const float* q, int64_t rows,
                      const float* kt, int64_t key_stride, int64_t keys, int64_t d) {
  int64_t j = 0;
  for (; j + 2 * W <= keys; j += 2 * W) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float* q0 = q + r * d;
      const float* q1 = q0 + d;
      const float* q2 = q1 + d;
      const float* q3 = q2 + d;
      Vec a00 = Vec::zero(), a01 = Vec::zero(), a10 = Vec::zero(), a11 = Vec::zero();
      Vec a20 = Vec::zero(), a21 = Vec::zero(), a30 = Vec::zero(), a31 = Vec::zero();
      for (int64_t c = 0; c < d; ++c) {
        const Vec k0 = Vec::load(kt + c * key_stride + j), k1 = Vec::load(kt + c * key_stride + j + W);
        Vec qv = Vec::set1(q0[c]);
        a00 = Vec::fmadd(qv, k0, a00); a01 = Vec::fmadd(qv, k1, a01);
        qv = Vec::set1(q1[c]);
        a10 = Vec::fmadd(qv, k0, a10); a11 = Vec::fmadd(qv, k1, a11);
        qv = Vec::set1(q2[c]);
        a20 = Vec::fmadd(qv, k0, a20); a21 = Vec::fmadd(qv, k1, a21);
        qv = Vec::set1(q3[c]);
        a30 = Vec::fmadd(qv, k0, a30); a31 = Vec::fmadd(qv, k1, a31);
      }
      float* s0 = s + r * s_stride + j;
      a00.store(s0); a01.store(s0 + W);
      a10.store(s0 + s_stride); a11.store(s0 + s_stride + W);
      a20.store(s0 + 2 * s_stride); a21.store(s0 + 2 * s_stride + W);
      a30.store(s0 + 3 * s_stride); a31.store(s0 + 3 * s_stride + W);
    }
    for (; r < rows; ++r) {
      Vec a0 = Vec::zero(), a1 = Vec::zero();
      for (int64_t c = 0; c < d; ++c) {
        Vec qv = Vec::set1(q[r * d + c]);
        a0 = Vec::fmadd(qv, Vec::load(kt + c * key_stride + j), a0);
        a1 = Vec::fmadd(qv, Vec::load(kt + c * key_stride + j + W), a1);
      }
      a0.store(s + r * s_stride + j);
      a1.store(s + r * s_stride + j + W);
    }
  }
  // One vector of keys: blocks of fewer than 2 * W keys (short sequences)
  // would otherwise all take the scalar loop below.
  for (; j + W <= keys; j += W) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float* q0 = q + r * d;
      Vec a0 = Vec::zero(), a1 = Vec::zero(), a2 = Vec::zero(), a3 = Vec::zero();
      for (int64_t c = 0; c < d; ++c) {
        const Vec kc = Vec::load(kt + c * key_stride + j);
        a0 = Vec::fmadd(Vec::set1(q0[c]), kc, a0);
        a1 = Vec::fmadd(Vec::set1(q0[d + c]), kc, a1);
        a2 = Vec::fmadd(Vec::set1(q0[2 * d + c]), kc, a2);
        a3 = Vec::fmadd(Vec::set1(q0[3 * d + c]), kc, a3);
      }
      float* s0 = s + r * s_stride + j;
      a0.store(s0); a1.store(s0 + s_stride); a2.store(s0 + 2 * s_stride); a3.store(s0 + 3 * s_stride);
    }
    for (; r < rows; ++r) {
      Vec a = Vec::zero();
      for (int64_t c = 0; c < d; ++c) a = Vec::fmadd(Vec::set1(q[r * d + c]), Vec::load(kt + c * key_stride + j), a);
      a.store(s + r * s_stride + j);
    }
  }
  for (; j < keys; ++j) {
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.f;
      for (int64_t c = 0; c < d; ++c) acc += q[r * d + c] * kt[c * key_stride + j];
      s[r * s_stride + j] = acc;
    }
  }
}

// Online-softmax update of `rows` rows with a block of scores (already scaled;
// -inf where masked): rescales o and l, turns s into probabilities.
inline void online_softmax_block(float* s, int64_t s_stride, int64_t rows, int64_t keys,
                                 float* m, float* l, float* o, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * s_stride;
    float bm = kNegInf;
    int64_t jm = 0;
    if (keys >= W) {
      Vec vmax = Vec::load(sr);
      for (jm = W; jm + W <= keys; jm += W) vmax = Vec::max(vmax, Vec::load(sr + jm));
      bm = vmax.reduce_max();
    }
    for (; jm < keys; ++jm) bm = std::max(bm, sr[jm]);
    const float m_new = std::max(m[r], bm);
    if (m_new == kNegInf) {  // everything masked so far
      for (int64_t j = 0; j < keys; ++j) sr[j] = 0.f;
      continue;
    }
    const float alpha = m[r] == kNegInf ? 0.f : sexp(m[r] - m_new);
    const Vec vm = Vec::set1(m_new);
    Vec vsum = Vec::zero();
    int64_t j = 0;
    for (; j + W <= keys; j += W) {
      Vec e = vexp(Vec::load(sr + j) - vm);
      e.store(sr + j);
      vsum = vsum + e;
    }
    float sum = vsum.reduce_add();
    for (; j < keys; ++j) { sr[j] = sexp(sr[j] - m_new); sum += sr[j]; }
    l[r] = l[r] * alpha + sum;
    m[r] = m_new;
    if (alpha != 1.f) {
      const Vec va = Vec::set1(alpha);
      float* orow = o + r * d;
      int64_t c = 0;
      for (; c + W <= d; c += W) (Vec::load(orow + c) * va).store(orow + c);
      for (; c < d; ++c) orow[c] *= alpha;
    }
  }
}

template <typename T>
void store_normalised(T* out, const float* o, float l, int64_t d) {
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const Vec vinv = Vec::set1(inv);
  int64_t c = 0;
  for (; c + W <= d; c += W) (Vec::load(o + c) * vinv).store(out + c);
  for (; c < d; ++c) out[c] = from_float<T>(o[c] * inv);
}

// Work space of one attention task, reused across the tasks of a thread.
struct AttentionScratch {
  std::vector<float> q, o, kt, v, s, m, l;
  void reserve(int64_t rows, int64_t d) {
    q.resize(rows * d); o.resize(rows * d);
    kt.resize(d * kKeyBlock); v.resize(kKeyBlock * d);
    s.resize(rows * kKeyBlock); m.resize(rows); l.resize(rows);
  }
};

// Converts keys [j0, j0 + n) of one head to float: transposed into kt
// ([d][kKeyBlock]) and v as rows ([n][d]).
template <typename T>
void convert_kv_block(float* kt, float* vout, const T* k, int64_t k_pos_stride, const T* v,
                      int64_t v_pos_stride, int64_t j0, int64_t n, int64_t d) {
  float* row = vout;  // v's first row doubles as the staging buffer for k
  for (int64_t j = 0; j < n; ++j) {
    to_floats(k + (j0 + j) * k_pos_stride, row, d);
    for (int64_t c = 0; c < d; ++c) kt[c * kKeyBlock + j] = row[c];
  }
  for (int64_t j = 0; j < n; ++j) to_floats(v + (j0 + j) * v_pos_stride, vout + j * d, d);
}

// Attention of `rows` query rows (already in w.q, pre-scaled) over keys
// [key_begin, key_end); row r may see keys j <= r + diag when causal (diag =
// position of row 0 among the keys). `block(j0, n, &kt, &v)` provides the
// keys and values of a block as float. Leaves o, m, l in w.
template <typename Blocks>
void attend(AttentionScratch& w, int64_t rows, Blocks&& block, int64_t key_begin, int64_t key_end,
            int64_t d, bool causal, int64_t diag) {
  for (int64_t j0 = key_begin; j0 < key_end; j0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, key_end - j0);
    if (causal && j0 > diag + rows - 1) break;  // every later key is masked for every row
    const float* kt;
    const float* v;
    block(j0, n, &kt, &v);
    scores_qk(w.s.data(), kKeyBlock, w.q.data(), rows, kt, kKeyBlock, n, d);
    if (causal && j0 + n - 1 > diag) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t first_masked = std::max<int64_t>(0, r + diag + 1 - j0);
        for (int64_t j = first_masked; j < n; ++j) w.s[r * kKeyBlock + j] = kNegInf;
      }
    }
    online_softmax_block(w.s.data(), kKeyBlock, rows, n, w.m.data(), w.l.data(), w.o.data(), d);
    accumulate_pv(w.o.data(), rows, w.s.data(), kKeyBlock, v, n, d);
  }
}

inline void reset_state(AttentionScratch& w, int64_t rows, int64_t d) {
  std::fill(w.o.begin(), w.o.begin() + rows * d, 0.f);
  std::fill(w.m.begin(), w.m.begin() + rows, kNegInf);
  std::fill(w.l.begin(), w.l.begin() + rows, 0.f);
}

// The keys and values of one kv head converted to float once and kept while a
// thread's consecutive tasks (query blocks, and the query heads of a group)
// read the same head: a block is converted on first use.
template <typename T>
class KvHeadCache {
 public:
  void bind(const T* k, int64_t k_pos_stride, const T* v, int64_t v_pos_stride, int64_t len, int64_t d) {
    if (k == k_ && v == v_) return;
    k_ = k; v_ = v; k_stride_ = k_pos_stride; v_stride_ = v_pos_stride; d_ = d;
    const int64_t blocks = (len + kKeyBlock - 1) / kKeyBlock;
    kt_.resize(blocks * d * kKeyBlock);
    v_rows_.resize(blocks * kKeyBlock * d);
    ready_.assign(blocks, 0);
  }
  void operator()(int64_t j0, int64_t n, const float** kt, const float** v) {
    const int64_t b = j0 / kKeyBlock;
    float* bk = kt_.data() + b * d_ * kKeyBlock;
    float* bv = v_rows_.data() + b * kKeyBlock * d_;
    if (!ready_[b]) {
      convert_kv_block(bk, bv, k_, k_stride_, v_, v_stride_, j0, n, d_);
      ready_[b] = 1;
    }
    *kt = bk;
    *v = bv;
  }

 private:
  const T* k_ = nullptr;
  const T* v_ = nullptr;
  int64_t k_stride_ = 0, v_stride_ = 0, d_ = 0;
  std::vector<float> kt_, v_rows_;
  std::vector<char> ready_;
};

template <typename T>
void prefill_tasks(const kpdrPrefillAttentionArgs& a, int64_t t0, int64_t t1) {
  constexpr int64_t kQueryBlock = 64;
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  const int64_t qblocks = (a.seq_q + kQueryBlock - 1) / kQueryBlock;
  AttentionScratch w;
  w.reserve(kQueryBlock, d);
  KvHeadCache<T> kv;
  for (int64_t task = t0; task < t1; ++task) {
    // Query blocks vary fastest, then the heads of a group: consecutive tasks
    // share a kv head (converted once), and any contiguous range of tasks mixes
    // the cheap early blocks and the expensive late ones of a causal mask.
    const int64_t qb = task % qblocks, bh = task / qblocks;
    const int64_t b = bh / a.heads, h = bh % a.heads, kvh = h / group;
    const int64_t i0 = qb * kQueryBlock, rows = std::min(kQueryBlock, a.seq_q - i0);
    const T* q = at<T>(a.q, b * a.q_stride[0] + h * a.q_stride[1]);
    kv.bind(at<T>(a.k, b * a.k_stride[0] + kvh * a.k_stride[1]), a.k_stride[2],
            at<T>(a.v, b * a.v_stride[0] + kvh * a.v_stride[1]), a.v_stride[2], a.seq_kv, d);
    for (int64_t r = 0; r < rows; ++r) {
      to_floats(q + (i0 + r) * a.q_stride[2], w.q.data() + r * d, d);
      for (int64_t c = 0; c < d; ++c) w.q[r * d + c] *= a.scale;
    }
    reset_state(w, rows, d);
    const int64_t diag = i0 + (a.seq_kv - a.seq_q);
    attend(w, rows, kv, 0, a.seq_kv, d, a.causal != 0, diag);
    for (int64_t r = 0; r < rows; ++r) {
      T* out = at<T>(a.out, b * a.out_stride[0] + h * a.out_stride[1] + (i0 + r) * a.out_stride[2]);
      store_normalised(out, w.o.data() + r * d, w.l[r], d);
    }
  }
}

#if defined(KP_VEC_AVX512_BF16)
// bfloat16 prefill on CPUs with AVX512-BF16: both matrix products use
// vdpbf16ps (32 bfloat16 products per instruction, float32 sums), twice the
// rate of float32 FMAs. Keys are packed as bfloat16 pairs along head_dim for
// q.k, values and probabilities as pairs along the keys for p.v; the online
// softmax stays in float32. Used when head_dim is a multiple of 32.
namespace bf16dp {

constexpr int64_t kPairs = kKeyBlock / 2;

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// kt2[i][j] = (k[j][2i], k[j][2i+1]) for keys j of the block (0 past n).
inline void pack_k(uint32_t* kt2, const BF16* k, int64_t stride, int64_t j0, int64_t n, int64_t d) {
  for (int64_t j = 0; j < kKeyBlock; ++j) {
    const BF16* row = j < n ? k + (j0 + j) * stride : nullptr;
    for (int64_t i = 0; i < d / 2; ++i) {
      uint32_t pair = 0;
      if (row) std::memcpy(&pair, row + 2 * i, sizeof(pair));  // rows may start at any element
      kt2[i * kKeyBlock + j] = pair;
    }
  }
}

// vp[p][c] = (v[2p][c], v[2p+1][c]) (0 past n).
inline void pack_v(uint32_t* vp, const BF16* v, int64_t stride, int64_t j0, int64_t n, int64_t d) {
  for (int64_t p = 0; p < kPairs; ++p) {
    const BF16* a = 2 * p < n ? v + (j0 + 2 * p) * stride : nullptr;
    const BF16* b = 2 * p + 1 < n ? v + (j0 + 2 * p + 1) * stride : nullptr;
    for (int64_t c = 0; c < d; ++c) {
      vp[p * d + c] = uint32_t(a ? a[c].bits : 0) | (uint32_t(b ? b[c].bits : 0) << 16);
    }
  }
}

// s[r][j] = scale * q[r] . k[j] for all kKeyBlock keys (padding keys give 0).
inline void scores(float* s, const uint32_t* q2, int64_t rows, const uint32_t* kt2, int64_t half, float scale) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < kKeyBlock; j += 32) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
      const uint32_t* q0 = q2 + r * half;
      for (int64_t i = 0; i < half; ++i) {
        const __m512bh k0 = as_bh(_mm512_loadu_si512(kt2 + i * kKeyBlock + j));
        const __m512bh k1 = as_bh(_mm512_loadu_si512(kt2 + i * kKeyBlock + j + 16));
        __m512bh qb = as_bh(_mm512_set1_epi32(int(q0[i])));
        a00 = _mm512_dpbf16_ps(a00, qb, k0); a01 = _mm512_dpbf16_ps(a01, qb, k1);
        qb = as_bh(_mm512_set1_epi32(int(q0[half + i])));
        a10 = _mm512_dpbf16_ps(a10, qb, k0); a11 = _mm512_dpbf16_ps(a11, qb, k1);
        qb = as_bh(_mm512_set1_epi32(int(q0[2 * half + i])));
        a20 = _mm512_dpbf16_ps(a20, qb, k0); a21 = _mm512_dpbf16_ps(a21, qb, k1);
        qb = as_bh(_mm512_set1_epi32(int(q0[3 * half + i])));
        a30 = _mm512_dpbf16_ps(a30, qb, k0); a31 = _mm512_dpbf16_ps(a31, qb, k1);
      }
      float* s0 = s + r * kKeyBlock + j;
      _mm512_storeu_ps(s0, _mm512_mul_ps(a00, vs)); _mm512_storeu_ps(s0 + 16, _mm512_mul_ps(a01, vs));
      s0 += kKeyBlock;
      _mm512_storeu_ps(s0, _mm512_mul_ps(a10, vs)); _mm512_storeu_ps(s0 + 16, _mm512_mul_ps(a11, vs));
      s0 += kKeyBlock;
      _mm512_storeu_ps(s0, _mm512_mul_ps(a20, vs)); _mm512_storeu_ps(s0 + 16, _mm512_mul_ps(a21, vs));
      s0 += kKeyBlock;
      _mm512_storeu_ps(s0, _mm512_mul_ps(a30, vs)); _mm512_storeu_ps(s0 + 16, _mm512_mul_ps(a31, vs));
    }
    for (; r < rows; ++r) {
      __m512 a0 = _mm512_setzero_ps(), a1 = a0;
      const uint32_t* qr = q2 + r * half;
      for (int64_t i = 0; i < half; ++i) {
        const __m512bh qb = as_bh(_mm512_set1_epi32(int(qr[i])));
        a0 = _mm512_dpbf16_ps(a0, qb, as_bh(_mm512_loadu_si512(kt2 + i * kKeyBlock + j)));
        a1 = _mm512_dpbf16_ps(a1, qb, as_bh(_mm512_loadu_si512(kt2 + i * kKeyBlock + j + 16)));
      }
      _mm512_storeu_ps(s + r * kKeyBlock + j, _mm512_mul_ps(a0, vs));
      _mm512_storeu_ps(s + r * kKeyBlock + j + 16, _mm512_mul_ps(a1, vs));
    }
  }
}

// o[r] += sum_j p[r][j] v[j] with p rounded to bfloat16 pairs.
inline void accumulate(float* o, int64_t rows, const float* p, uint32_t* p2, const uint32_t* vp, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < kKeyBlock; j += 32) {
      const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + r * kKeyBlock + j + 16),
                                                  _mm512_loadu_ps(p + r * kKeyBlock + j));
      _mm512_storeu_si512(p2 + r * kPairs + j / 2, (__m512i)packed);
    }
  }
  for (int64_t c = 0; c < d; c += 32) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      float* o0 = o + r * d + c;
      __m512 a00 = _mm512_loadu_ps(o0), a01 = _mm512_loadu_ps(o0 + 16);
      __m512 a10 = _mm512_loadu_ps(o0 + d), a11 = _mm512_loadu_ps(o0 + d + 16);
      __m512 a20 = _mm512_loadu_ps(o0 + 2 * d), a21 = _mm512_loadu_ps(o0 + 2 * d + 16);
      __m512 a30 = _mm512_loadu_ps(o0 + 3 * d), a31 = _mm512_loadu_ps(o0 + 3 * d + 16);
      const uint32_t* p0 = p2 + r * kPairs;
      for (int64_t i = 0; i < kPairs; ++i) {
        const __m512bh v0 = as_bh(_mm512_loadu_si512(vp + i * d + c));
        const __m512bh v1 = as_bh(_mm512_loadu_si512(vp + i * d + c + 16));
        __m512bh pb = as_bh(_mm512_set1_epi32(int(p0[i])));
        a00 = _mm512_dpbf16_ps(a00, pb, v0); a01 = _mm512_dpbf16_ps(a01, pb, v1);
        pb = as_bh(_mm512_set1_epi32(int(p0[kPairs + i])));
        a10 = _mm512_dpbf16_ps(a10, pb, v0); a11 = _mm512_dpbf16_ps(a11, pb, v1);
        pb = as_bh(_mm512_set1_epi32(int(p0[2 * kPairs + i])));
        a20 = _mm512_dpbf16_ps(a20, pb, v0); a21 = _mm512_dpbf16_ps(a21, pb, v1);
        pb = as_bh(_mm512_set1_epi32(int(p0[3 * kPairs + i])));
        a30 = _mm512_dpbf16_ps(a30, pb, v0); a31 = _mm512_dpbf16_ps(a31, pb, v1);
      }
      _mm512_storeu_ps(o0, a00); _mm512_storeu_ps(o0 + 16, a01);
      _mm512_storeu_ps(o0 + d, a10); _mm512_storeu_ps(o0 + d + 16, a11);
      _mm512_storeu_ps(o0 + 2 * d, a20); _mm512_storeu_ps(o0 + 2 * d + 16, a21);
      _mm512_storeu_ps(o0 + 3 * d, a30); _mm512_storeu_ps(o0 + 3 * d + 16, a31);
    }
    for (; r < rows; ++r) {
      float* orow = o + r * d + c;
      __m512 a0 = _mm512_loadu_ps(orow), a1 = _mm512_loadu_ps(orow + 16);
      for (int64_t i = 0; i < kPairs; ++i) {
        const __m512bh pb = as_bh(_mm512_set1_epi32(int(p2[r * kPairs + i])));
        a0 = _mm512_dpbf16_ps(a0, pb, as_bh(_mm512_loadu_si512(vp + i * d + c)));
        a1 = _mm512_dpbf16_ps(a1, pb, as_bh(_mm512_loadu_si512(vp + i * d + c + 16)));
      }
      _mm512_storeu_ps(orow, a0);
      _mm512_storeu_ps(orow + 16, a1);
    }
  }
}

// Packed keys and values of one kv head, packed block by block on first use
// and kept while consecutive tasks read the same head.
class PackedHead {
 public:
  void bind(const BF16* k, int64_t ks, const BF16* v, int64_t vs, int64_t len, int64_t d) {
    if (k == k_ && v == v_) return;
    k_ = k; v_ = v; ks_ = ks; vs_ = vs; d_ = d; len_ = len;
    const int64_t blocks = (len + kKeyBlock - 1) / kKeyBlock;
    kt2_.resize(blocks * kKeyBlock * d / 2);
    vp_.resize(blocks * kPairs * d);
    ready_.assign(blocks, 0);
  }
  void block(int64_t j0, const uint32_t** kt2, const uint32_t** vp) {
    const int64_t b = j0 / kKeyBlock, n = std::min(kKeyBlock, len_ - j0);
    uint32_t* bk = kt2_.data() + b * kKeyBlock * d_ / 2;
    uint32_t* bv = vp_.data() + b * kPairs * d_;
    if (!ready_[b]) {
      pack_k(bk, k_, ks_, j0, n, d_);
      pack_v(bv, v_, vs_, j0, n, d_);
      ready_[b] = 1;
    }
    *kt2 = bk;
    *vp = bv;
  }

 private:
  const BF16* k_ = nullptr;
  const BF16* v_ = nullptr;
  int64_t ks_ = 0, vs_ = 0, d_ = 0, len_ = 0;
  std::vector<uint32_t> kt2_, vp_;
  std::vector<char> ready_;
};

#if defined(KP_CPU_AMX)
// Prefill's two products on AMX tiles (the amx level), from the same packed
// operands: q2 rows are tile A for q.k and kt2 (pairs of head_dim x keys) is
// already tile B's VNNI layout; for p.v the probabilities as pairs (p2) are
// A and vp (pairs of keys x columns) is B. 16 x 16 float C tiles, 16 rows at
// a time (rows past a short last query block compute unused values).
// LDTILECFG's 64-byte operand (palette 1: rows and bytes per row of tiles 0-7).
struct TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

namespace prefill_tiles {

inline void configure() {
  TileConfig cfg{};
  cfg.palette = 1;
  for (int t = 0; t < 3; ++t) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
  _tile_loadconfig(&cfg);
}

inline void scores(float* s, const uint32_t* q2, int64_t rows, const uint32_t* kt2, int64_t half, float scale) {
  const int64_t rows16 = (rows + 15) / 16 * 16;
  for (int64_t r0 = 0; r0 < rows16; r0 += 16) {
    for (int64_t j0 = 0; j0 < kKeyBlock; j0 += 16) {
      _tile_zero(0);
      for (int64_t c = 0; c < half; c += 16) {
        _tile_loadd(1, q2 + r0 * half + c, half * 4);
        _tile_loadd(2, kt2 + c * kKeyBlock + j0, kKeyBlock * 4);
        _tile_dpbf16ps(0, 1, 2);
      }
      _tile_stored(0, s + r0 * kKeyBlock + j0, kKeyBlock * 4);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < rows * kKeyBlock; i += 16) _mm512_storeu_ps(s + i, _mm512_mul_ps(_mm512_loadu_ps(s + i), vs));
}

inline void accumulate(float* o, int64_t rows, const float* p, uint32_t* p2, const uint32_t* vp, int64_t d) {
  const int64_t rows16 = (rows + 15) / 16 * 16;
  for (int64_t r = 0; r < rows16; ++r) {
    for (int64_t j = 0; j < kKeyBlock; j += 32) {
      const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + r * kKeyBlock + j + 16),
                                                  _mm512_loadu_ps(p + r * kKeyBlock + j));
      _mm512_storeu_si512(p2 + r * kPairs + j / 2, (__m512i)packed);
    }
  }
  for (int64_t r0 = 0; r0 < rows16; r0 += 16) {
    for (int64_t c0 = 0; c0 < d; c0 += 16) {
      _tile_loadd(0, o + r0 * d + c0, d * int64_t(sizeof(float)));
      for (int64_t p0 = 0; p0 < kPairs; p0 += 16) {
        _tile_loadd(1, p2 + r0 * kPairs + p0, kPairs * 4);
        _tile_loadd(2, vp + p0 * d + c0, d * 4);
        _tile_dpbf16ps(0, 1, 2);
      }
      _tile_stored(0, o + r0 * d + c0, d * int64_t(sizeof(float)));
    }
  }
}

}  // namespace prefill_tiles
#endif  // KP_CPU_AMX

inline void tasks(const kpdrPrefillAttentionArgs& a, int64_t t0, int64_t t1) {
  constexpr int64_t kQueryBlock = 64;
  const int64_t d = a.head_dim, half = d / 2, group = a.heads / a.kv_heads;
  const int64_t qblocks = (a.seq_q + kQueryBlock - 1) / kQueryBlock;
  AttentionScratch w;
  w.reserve(kQueryBlock, d);
  std::vector<uint32_t> q2(kQueryBlock * half), p2(kQueryBlock * kPairs);
  PackedHead kv;
  const bool causal = a.causal != 0;
#if defined(KP_CPU_AMX)
  prefill_tiles::configure();
  struct Release { ~Release() { _tile_release(); } } release;
#endif
  for (int64_t task = t0; task < t1; ++task) {
    const int64_t qb = task % qblocks, bh = task / qblocks;
    const int64_t b = bh / a.heads, h = bh % a.heads, kvh = h / group;
    const int64_t i0 = qb * kQueryBlock, rows = std::min(kQueryBlock, a.seq_q - i0);
    const BF16* q = at<BF16>(a.q, b * a.q_stride[0] + h * a.q_stride[1]);
    kv.bind(at<BF16>(a.k, b * a.k_stride[0] + kvh * a.k_stride[1]), a.k_stride[2],
            at<BF16>(a.v, b * a.v_stride[0] + kvh * a.v_stride[1]), a.v_stride[2], a.seq_kv, d);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(q2.data() + r * half, q + (i0 + r) * a.q_stride[2], half * sizeof(uint32_t));
    }
    reset_state(w, rows, d);
    const int64_t diag = i0 + (a.seq_kv - a.seq_q);
    for (int64_t j0 = 0; j0 < a.seq_kv; j0 += kKeyBlock) {
      const int64_t n = std::min(kKeyBlock, a.seq_kv - j0);
      if (causal && j0 > diag + rows - 1) break;
      const uint32_t* kt2;
      const uint32_t* vp;
      kv.block(j0, &kt2, &vp);
#if defined(KP_CPU_AMX)
      prefill_tiles::scores(w.s.data(), q2.data(), rows, kt2, half, a.scale);
#else
      scores(w.s.data(), q2.data(), rows, kt2, half, a.scale);
#endif
      for (int64_t r = 0; r < rows; ++r) {
        // Padding keys, and keys the causal mask hides, get no weight.
        int64_t first_masked = n;
        if (causal) first_masked = std::min(n, std::max<int64_t>(0, r + diag + 1 - j0));
        for (int64_t j = first_masked; j < kKeyBlock; ++j) w.s[r * kKeyBlock + j] = kNegInf;
      }
      online_softmax_block(w.s.data(), kKeyBlock, rows, kKeyBlock, w.m.data(), w.l.data(), w.o.data(), d);
#if defined(KP_CPU_AMX)
      prefill_tiles::accumulate(w.o.data(), rows, w.s.data(), p2.data(), vp, d);
#else
      accumulate(w.o.data(), rows, w.s.data(), p2.data(), vp, d);
#endif
    }
    for (int64_t r = 0; r < rows; ++r) {
      BF16* out = at<BF16>(a.out, b * a.out_stride[0] + h * a.out_stride[1] + (i0 + r) * a.out_stride[2]);
      store_normalised(out, w.o.data() + r * d, w.l[r], d);
    }
  }
}

// --- decode: one query row per head of a kv group, keys read once ---------
//
// q.k: each key's dot product with a row is d / 32 vdpbf16ps into one vector
// of 16 partial sums; 16 keys' vectors are then summed across lanes together
// (reduce16: 45 shuffles and adds, where one horizontal sum per key costs
// about 10), giving the 16 scores as one vector. p.v: two value rows
// interleaved (vpunpck[lh]wd) are the (key 2i, key 2i + 1) pairs vdpbf16ps
// takes, so no packing pass; the interleave permutes the columns within each
// 32, so the accumulator o is kept in that order (see decode_column) and put
// back in order once per chunk.

// Lane i of the result is the sum of the lanes of a[kReduceSource[i]] (the
// tree below pairs its inputs in this order; it is its own inverse).
constexpr int kReduceSource[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};

inline __m512 reduce16(const __m512* a) {
  __m512 x[8], y[4], z[2];
#pragma GCC unroll 16
  for (int j = 0; j < 8; ++j) {  // 256-bit halves: low = a[j], high = a[j + 8]
    x[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[j], a[j + 8], 0x44), _mm512_shuffle_f32x4(a[j], a[j + 8], 0xEE));
  }
#pragma GCC unroll 16
  for (int j = 0; j < 4; ++j) {  // 128-bit lanes: a[j], a[j + 8], a[j + 4], a[j + 12]
    y[j] = _mm512_add_ps(_mm512_shuffle_f32x4(x[j], x[j + 4], 0x88), _mm512_shuffle_f32x4(x[j], x[j + 4], 0xDD));
  }
#pragma GCC unroll 16
  for (int j = 0; j < 2; ++j) {
    z[j] = _mm512_add_ps(_mm512_shuffle_ps(y[j], y[j + 2], 0x44), _mm512_shuffle_ps(y[j], y[j + 2], 0xEE));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xDD));
}

// s[j] = scale * q . k[j] for the 16 keys keys[0..15] (rows of d bfloat16).
inline void decode_scores16(float* s, const BF16* q, const BF16* const* keys, int64_t d, float scale) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 32) {
    const __m512bh qc = as_bh(_mm512_loadu_si512(q + c));
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      acc[i] = _mm512_dpbf16_ps(acc[i], qc, as_bh(_mm512_loadu_si512(keys[kReduceSource[i]] + c)));
    }
  }
  _mm512_storeu_ps(s, _mm512_mul_ps(reduce16(acc), _mm512_set1_ps(scale)));
}

// The column of head_dim held at position i of a decode accumulator row.
inline int64_t decode_column(int64_t i) {
  const int64_t base = i & ~int64_t(31), e = i & 15, lane = e >> 2;
  return base + lane * 8 + ((i & 16) ? 4 : 0) + (e & 3);
}

// o[r] += sum over key pairs i < pairs of p2[r][i] . (va_i, vb_i) for R rows
// and CG * 32 columns from c (accumulator order, above).
template <int R, int CG>
inline void decode_pv_tile(float* o, int64_t d, int64_t c, const uint32_t* p2, int64_t p_stride,
                           const BF16* const* va, const BF16* const* vb, int64_t pairs) {
  __m512 acc[R][2 * CG];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < 2 * CG; ++g) acc[r][g] = _mm512_loadu_ps(o + r * d + c + 16 * g);
  for (int64_t i = 0; i < pairs; ++i) {
    __m512bh v[2 * CG];
#pragma GCC unroll 16
    for (int g = 0; g < CG; ++g) {
      const __m512i a = _mm512_loadu_si512(va[i] + c + 32 * g), b = _mm512_loadu_si512(vb[i] + c + 32 * g);
      v[2 * g] = as_bh(_mm512_unpacklo_epi16(a, b));
      v[2 * g + 1] = as_bh(_mm512_unpackhi_epi16(a, b));
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh pb = as_bh(_mm512_set1_epi32(int(p2[r * p_stride + i])));
#pragma GCC unroll 16
      for (int g = 0; g < 2 * CG; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], pb, v[g]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < 2 * CG; ++g) _mm512_storeu_ps(o + r * d + c + 16 * g, acc[r][g]);
}

template <int R>
inline void decode_pv_rows(float* o, int64_t d, const uint32_t* p2, int64_t p_stride, const BF16* const* va,
                           const BF16* const* vb, int64_t pairs) {
  int64_t c = 0;
  for (; c + 64 <= d; c += 64) decode_pv_tile<R, 2>(o, d, c, p2, p_stride, va, vb, pairs);
  if (c < d) decode_pv_tile<R, 1>(o, d, c, p2, p_stride, va, vb, pairs);
}

#if defined(KP_CPU_AMX)
// q.k on AMX tiles (the amx level): S^T = K Q^T, 16 keys at a time. The key
// rows are tile A as they lie in the cache (16 rows of 32 bfloat16, the row
// stride being the cache's), the group's queries are tile B in the VNNI
// layout TDPBF16PS takes (pairs of head_dim along rows, one column per query
// head), packed once per chunk; C is 16 keys x group float sums. Replaces
// d / 32 vdpbf16ps and the lane-sum tree per key and query head.
namespace amx_tiles {

// Tiles for q.k: 0 = C (16 keys x group floats), 1 = A (16 keys x 32
// bfloat16), 2 = B (16 pairs x group). For p.v: 3 = C (group rows x 16
// columns of o), 4 = A (group rows x 16 pairs of probabilities), 5 = B (16
// pairs x 16 columns of values). Loaded on every chunk: cheap beside 256+
// keys, and a thread may have run other tile code in between.
inline void configure(int64_t group) {
  TileConfig cfg{};
  cfg.palette = 1;
  const auto g = static_cast<uint8_t>(group);
  const auto g4 = static_cast<uint16_t>(group * 4);
  cfg.rows[0] = 16; cfg.colsb[0] = g4;
  cfg.rows[1] = 16; cfg.colsb[1] = 64;
  cfg.rows[2] = 16; cfg.colsb[2] = g4;
  cfg.rows[3] = g; cfg.colsb[3] = 64;
  cfg.rows[4] = g; cfg.colsb[4] = 64;
  cfg.rows[5] = 16; cfg.colsb[5] = 64;
  _tile_loadconfig(&cfg);
}

// o[g] += sum over 16 key pairs i of p2[g][i] . (va_i, vb_i), every column:
// the values are interleaved as decode_pv_tile does (so o keeps its column
// order) into vbuf, one 16 x 16 pair tile per 16 columns, then each 16
// columns of o are a C tile.
inline void pv16(float* o, int64_t d, int64_t group, const uint32_t* p2, int64_t p_stride,
                 const BF16* const* va, const BF16* const* vb, uint32_t* vbuf) {
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t c = 0; c < d; c += 32) {
      const __m512i x = _mm512_loadu_si512(va[i] + c), y = _mm512_loadu_si512(vb[i] + c);
      _mm512_storeu_si512(vbuf + ((c / 16) * 16 + i) * 16, _mm512_unpacklo_epi16(x, y));
      _mm512_storeu_si512(vbuf + ((c / 16 + 1) * 16 + i) * 16, _mm512_unpackhi_epi16(x, y));
    }
  }
  _tile_loadd(4, p2, p_stride * 4);
  for (int64_t t = 0; t < d / 16; ++t) {
    _tile_loadd(3, o + 16 * t, d * int64_t(sizeof(float)));
    _tile_loadd(5, vbuf + t * 256, 64);
    _tile_dpbf16ps(3, 4, 5);
    _tile_stored(3, o + 16 * t, d * int64_t(sizeof(float)));
  }
}

// qb[c][i][g] = (q_g[32c + 2i], q_g[32c + 2i + 1]).
inline void pack_queries(uint32_t* qb, const BF16* const* q, int64_t group, int64_t d) {
  for (int64_t c = 0; c < d / 32; ++c)
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t g = 0; g < group; ++g) std::memcpy(&qb[(c * 16 + i) * group + g], q[g] + 32 * c + 2 * i, 4);
}

// s[g][j] = scale * q_g . k_j for 16 keys from `keys` (rows `stride` elements
// apart, all 16 readable); cbuf holds 16 x group floats.
inline void scores16(float* s, int64_t s_stride, const BF16* keys, int64_t stride, const uint32_t* qb,
                     int64_t group, int64_t d, float scale, float* cbuf) {
  _tile_zero(0);
  for (int64_t c = 0; c < d / 32; ++c) {
    _tile_loadd(1, keys + 32 * c, stride * int64_t(sizeof(BF16)));
    _tile_loadd(2, qb + c * 16 * group, group * 4);
    _tile_dpbf16ps(0, 1, 2);
  }
  _tile_stored(0, cbuf, group * 4);
  for (int64_t g = 0; g < group; ++g)
    for (int64_t j = 0; j < 16; ++j) s[g * s_stride + j] = cbuf[j * group + g] * scale;
}

}  // namespace amx_tiles
#endif  // KP_CPU_AMX

// Attention of the `group` query heads of kv head kvh (batch b) over keys
// [j0, j1), bfloat16 with head_dim % 32 == 0. Leaves m, l and o (in column
// order) in w, as the generic decode_chunk does.
inline void decode_chunk(const kpdrDecodeAttentionArgs& a, int64_t b, int64_t kvh, int64_t j0, int64_t j1,
                         AttentionScratch& w, std::vector<uint32_t>& p2, std::vector<BF16>& zeros) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  zeros.assign(d, BF16{0});
  p2.resize(group * kPairs);
  reset_state(w, group, d);
  const BF16* k = at<BF16>(a.k, b * a.k_stride[0] + kvh * a.k_stride[1]);
  const BF16* v = at<BF16>(a.v, b * a.v_stride[0] + kvh * a.v_stride[1]);
  const BF16* keys[kKeyBlock];
  const BF16* va[kPairs];
  const BF16* vb[kPairs];
#if defined(KP_CPU_AMX)
  // A tile's row is 64 bytes and C holds at most 16 query heads.
  const bool use_tiles = group <= 16;
  std::vector<uint32_t> qb, vbuf;
  std::vector<BF16> tail;
  float cbuf[16 * 16];
  if (use_tiles) {
    const BF16* qs[16];
    for (int64_t g = 0; g < group; ++g) qs[g] = at<BF16>(a.q, b * a.q_stride[0] + (kvh * group + g) * a.q_stride[1]);
    qb.resize(d / 2 * group);
    amx_tiles::pack_queries(qb.data(), qs, group, d);
    tail.assign(16 * d, BF16{0});
    vbuf.resize(16 * d);
    amx_tiles::configure(group);
  }
#endif
  for (int64_t b0 = j0; b0 < j1; b0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, j1 - b0), pairs = (n + 1) / 2;
    for (int64_t j = 0; j < kKeyBlock; ++j) keys[j] = j < n ? k + (b0 + j) * a.k_stride[2] : zeros.data();
    for (int64_t i = 0; i < pairs; ++i) {
      va[i] = v + (b0 + 2 * i) * a.v_stride[2];
      vb[i] = 2 * i + 1 < n ? v + (b0 + 2 * i + 1) * a.v_stride[2] : zeros.data();
    }
#if defined(KP_CPU_AMX)
    if (use_tiles) {
      for (int64_t j = 0; j < n; j += 16) {
        const BF16* rows = keys[j];
        int64_t stride = a.k_stride[2];
        if (n - j < 16) {  // the tile reads 16 rows: copy the last few, zero-padded
          for (int64_t r = 0; r < 16; ++r) std::memcpy(tail.data() + r * d, keys[j + r], d * sizeof(BF16));
          rows = tail.data();
          stride = d;
        }
        amx_tiles::scores16(w.s.data() + j, kKeyBlock, rows, stride, qb.data(), group, d, a.scale, cbuf);
      }
    } else
#endif
    for (int64_t g = 0; g < group; ++g) {
      const BF16* q = at<BF16>(a.q, b * a.q_stride[0] + (kvh * group + g) * a.q_stride[1]);
      for (int64_t j = 0; j < n; j += 16) decode_scores16(w.s.data() + g * kKeyBlock + j, q, keys + j, d, a.scale);
    }
    online_softmax_block(w.s.data(), kKeyBlock, group, n, w.m.data(), w.l.data(), w.o.data(), d);
    for (int64_t g = 0; g < group; ++g) {
      float* sr = w.s.data() + g * kKeyBlock;
      for (int64_t j = n; j < 2 * pairs; ++j) sr[j] = 0.f;  // the odd key's missing partner
      for (int64_t j = 0; j < 2 * pairs; j += 32) {
        const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(sr + j + 16), _mm512_loadu_ps(sr + j));
        _mm512_storeu_si512(p2.data() + g * kPairs + j / 2, (__m512i)packed);
      }
    }
#if defined(KP_CPU_AMX)
    if (use_tiles) {
      // Whole tiles of 16 pairs: the missing ones read zero rows with zero weight.
      const int64_t padded = (pairs + 15) / 16 * 16;
      for (int64_t i = pairs; i < padded; ++i) va[i] = vb[i] = zeros.data();
      for (int64_t g = 0; g < group; ++g) {
        std::fill(p2.data() + g * kPairs + pairs, p2.data() + g * kPairs + padded, 0u);
      }
      for (int64_t i0 = 0; i0 < pairs; i0 += 16) {
        amx_tiles::pv16(w.o.data(), d, group, p2.data() + i0, kPairs, va + i0, vb + i0, vbuf.data());
      }
      continue;
    }
#endif
    int64_t r = 0;
    for (; r + 4 <= group; r += 4) decode_pv_rows<4>(w.o.data() + r * d, d, p2.data() + r * kPairs, kPairs, va, vb, pairs);
    float* o = w.o.data() + r * d;
    const uint32_t* pr = p2.data() + r * kPairs;
    switch (group - r) {
      case 3: decode_pv_rows<3>(o, d, pr, kPairs, va, vb, pairs); break;
      case 2: decode_pv_rows<2>(o, d, pr, kPairs, va, vb, pairs); break;
      case 1: decode_pv_rows<1>(o, d, pr, kPairs, va, vb, pairs); break;
      default: break;
    }
  }
#if defined(KP_CPU_AMX)
  if (use_tiles) _tile_release();
#endif
  // Back to column order.
  std::vector<float>& tmp = w.v;
  for (int64_t g = 0; g < group; ++g) {
    float* o = w.o.data() + g * d;
    for (int64_t i = 0; i < d; ++i) tmp[decode_column(i)] = o[i];
    std::copy(tmp.begin(), tmp.begin() + d, o);
  }
}

}  // namespace bf16dp
#endif  // KP_VEC_AVX512_BF16

void prefill_attention(const kpdrPrefillAttentionArgs& a) {
  const int64_t qblocks = (a.seq_q + 63) / 64;
#if defined(KP_VEC_AVX512_BF16)
  if (a.dtype == KPDR_DTYPE_BFLOAT16 && a.head_dim % 32 == 0) {
    kp::parallel_for(0, a.batch * a.heads * qblocks, 1,
                     [&](int64_t b, int64_t e) { bf16dp::tasks(a, b, e); });
    return;
  }
#endif
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    kp::parallel_for(0, a.batch * a.heads * qblocks, 1,
                     [&](int64_t b, int64_t e) { prefill_tasks<T>(a, b, e); });
  });
}

// s[r][j] = q[r] . k[j] for a few rows (the query heads of a group) with keys
// read as rows of the storage type: each key is loaded once for all rows.
template <typename T>
void scores_rows(float* s, int64_t s_stride, const float* q, int64_t rows, const T* k,
                 int64_t k_pos_stride, int64_t n, int64_t d) {
  for (int64_t j = 0; j < n; ++j) {
    const T* kj = k + j * k_pos_stride;
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float* q0 = q + r * d;
      Vec a0 = Vec::zero(), a1 = Vec::zero(), a2 = Vec::zero(), a3 = Vec::zero();
      int64_t c = 0;
      for (; c + W <= d; c += W) {
        const Vec kv = Vec::load(kj + c);
        a0 = Vec::fmadd(Vec::load(q0 + c), kv, a0);
        a1 = Vec::fmadd(Vec::load(q0 + d + c), kv, a1);
        a2 = Vec::fmadd(Vec::load(q0 + 2 * d + c), kv, a2);
        a3 = Vec::fmadd(Vec::load(q0 + 3 * d + c), kv, a3);
      }
      float s0 = a0.reduce_add(), s1 = a1.reduce_add(), s2 = a2.reduce_add(), s3 = a3.reduce_add();
      for (; c < d; ++c) {
        const float kc = to_float(kj[c]);
        s0 += q0[c] * kc; s1 += q0[d + c] * kc; s2 += q0[2 * d + c] * kc; s3 += q0[3 * d + c] * kc;
      }
      s[r * s_stride + j] = s0; s[(r + 1) * s_stride + j] = s1;
      s[(r + 2) * s_stride + j] = s2; s[(r + 3) * s_stride + j] = s3;
    }
    for (; r < rows; ++r) {
      const float* qr = q + r * d;
      Vec a = Vec::zero();
      int64_t c = 0;
      for (; c + W <= d; c += W) a = Vec::fmadd(Vec::load(qr + c), Vec::load(kj + c), a);
      float acc = a.reduce_add();
      for (; c < d; ++c) acc += qr[c] * to_float(kj[c]);
      s[r * s_stride + j] = acc;
    }
  }
}

// Decode: the query heads of one kv head form the rows, so each cached key
// and value is read once for the whole group. Long caches are split into
// chunks processed in parallel and merged (flash-decoding).
template <typename T>
void decode_chunk(const kpdrDecodeAttentionArgs& a, int64_t b, int64_t kvh, int64_t j0,
                  int64_t j1, AttentionScratch& w) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  for (int64_t g = 0; g < group; ++g) {
    const T* q = at<T>(a.q, b * a.q_stride[0] + (kvh * group + g) * a.q_stride[1]);
    to_floats(q, w.q.data() + g * d, d);
    for (int64_t c = 0; c < d; ++c) w.q[g * d + c] *= a.scale;
  }
  reset_state(w, group, d);
  const T* k = at<T>(a.k, b * a.k_stride[0] + kvh * a.k_stride[1]);
  const T* v = at<T>(a.v, b * a.v_stride[0] + kvh * a.v_stride[1]);
  for (int64_t b0 = j0; b0 < j1; b0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, j1 - b0);
    scores_rows(w.s.data(), kKeyBlock, w.q.data(), group, k + b0 * a.k_stride[2], a.k_stride[2], n, d);
    online_softmax_block(w.s.data(), kKeyBlock, group, n, w.m.data(), w.l.data(), w.o.data(), d);
    const float* vf;
    if (std::is_same_v<T, float> && a.v_stride[2] == d) {
      vf = reinterpret_cast<const float*>(v + b0 * d);  // already float rows
    } else {
      for (int64_t j = 0; j < n; ++j) to_floats(v + (b0 + j) * a.v_stride[2], w.v.data() + j * d, d);
      vf = w.v.data();
    }
    accumulate_pv(w.o.data(), group, w.s.data(), kKeyBlock, vf, n, d);
  }
}

void decode_attention(const kpdrDecodeAttentionArgs& a) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  const int64_t heads_total = a.batch * a.kv_heads;
  // Split-K: enough chunks of the cache for four tasks per thread of the pool
  // (so B = 1 uses every core and uneven lengths still balance), none shorter
  // than 256 keys. The partial results cost (2 + d) floats per row and chunk.
  constexpr int64_t kMinChunk = 256;
  const int64_t want_tasks = 4 * std::max(16, kp::pool_threads());
  int64_t splits = std::max<int64_t>(1, std::min<int64_t>(
      (a.cache_len + kMinChunk - 1) / kMinChunk, (want_tasks + heads_total - 1) / heads_total));
  const int64_t chunk = (a.cache_len + splits - 1) / splits;
  splits = (a.cache_len + chunk - 1) / chunk;
  // Per (batch, kv head, split): m and l per row, then o rows.
  const int64_t part = group * (2 + d);
  std::vector<float> partial(heads_total * splits * part);
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    kp::parallel_for(0, heads_total * splits, 1, [&](int64_t t0, int64_t t1) {
      AttentionScratch w;
      w.reserve(group, d);
#if defined(KP_VEC_AVX512_BF16)
      std::vector<uint32_t> p2;
      std::vector<BF16> zeros;
      constexpr bool kBf16Dot = std::is_same_v<T, BF16>;
#endif
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t split = task % splits, bk = task / splits;
        const int64_t b = bk / a.kv_heads, kvh = bk % a.kv_heads;
        const int64_t len = a.lengths ? a.lengths[b] : a.cache_len;
        const int64_t j0 = split * chunk, j1 = std::min(len, j0 + chunk);
        float* p = partial.data() + task * part;
        if (j0 >= j1) {
          for (int64_t g = 0; g < group; ++g) { p[g] = kNegInf; p[group + g] = 0.f; }
          continue;
        }
#if defined(KP_VEC_AVX512_BF16)
        if (kBf16Dot && d % 32 == 0) {
          bf16dp::decode_chunk(a, b, kvh, j0, j1, w, p2, zeros);
        } else {
          decode_chunk<T>(a, b, kvh, j0, j1, w);
        }
#else
        decode_chunk<T>(a, b, kvh, j0, j1, w);
#endif
        std::copy(w.m.begin(), w.m.begin() + group, p);
        std::copy(w.l.begin(), w.l.begin() + group, p + group);
        std::copy(w.o.begin(), w.o.begin() + group * d, p + 2 * group);
      }
    });
    // Merge the splits of each (batch, kv head) and write the outputs.
    kp::parallel_for(0, heads_total, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> o(d);
      for (int64_t bk = t0; bk < t1; ++bk) {
        const int64_t b = bk / a.kv_heads, kvh = bk % a.kv_heads;
        for (int64_t g = 0; g < group; ++g) {
          float m = kNegInf;
          for (int64_t s = 0; s < splits; ++s) m = std::max(m, partial[(bk * splits + s) * part + g]);
          float l = 0.f;
          std::fill(o.begin(), o.end(), 0.f);
          for (int64_t s = 0; s < splits; ++s) {
            const float* p = partial.data() + (bk * splits + s) * part;
            if (p[g] == kNegInf) continue;
            const float f = sexp(p[g] - m);
            l += p[group + g] * f;
            const float* po = p + 2 * group + g * d;
            for (int64_t c = 0; c < d; ++c) o[c] += po[c] * f;
          }
          T* out = at<T>(a.out, b * a.out_stride[0] + (kvh * group + g) * a.out_stride[1]);
          store_normalised(out, o.data(), l, d);
        }
      }
    });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
