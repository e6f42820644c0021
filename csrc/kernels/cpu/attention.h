// decode_attention and prefill_attention: the online softmax over blocks of
// keys, flash-decoding splits for decode (merged in the same parallel
// region), AVX512-BF16 dot products and AMX tiles for bfloat16.
#pragma once

#include <atomic>
#include <memory>

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
  LineVector<float> q, o, kt, v, s, m, l;
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
// rate of float32 FMAs (at amx, tile products: prefill_tiles). Keys are packed
// as bfloat16 pairs along head_dim for q.k, values and probabilities as pairs
// along the keys for p.v, once per call (pack_all); the online softmax stays
// in float32 (base 2, rescaling lazily: softmax_rows). Used when head_dim is
// a multiple of 32.
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

// s[r][j] = q[r] . k[j] for all kKeyBlock keys (padding keys give 0); rows of
// s are s_stride floats apart.
inline void scores(float* s, int64_t s_stride, const uint32_t* q2, int64_t rows, const uint32_t* kt2, int64_t half) {
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
      float* s0 = s + r * s_stride + j;
      _mm512_storeu_ps(s0, a00); _mm512_storeu_ps(s0 + 16, a01);
      s0 += s_stride;
      _mm512_storeu_ps(s0, a10); _mm512_storeu_ps(s0 + 16, a11);
      s0 += s_stride;
      _mm512_storeu_ps(s0, a20); _mm512_storeu_ps(s0 + 16, a21);
      s0 += s_stride;
      _mm512_storeu_ps(s0, a30); _mm512_storeu_ps(s0 + 16, a31);
    }
    for (; r < rows; ++r) {
      __m512 a0 = _mm512_setzero_ps(), a1 = a0;
      const uint32_t* qr = q2 + r * half;
      for (int64_t i = 0; i < half; ++i) {
        const __m512bh qb = as_bh(_mm512_set1_epi32(int(qr[i])));
        a0 = _mm512_dpbf16_ps(a0, qb, as_bh(_mm512_loadu_si512(kt2 + i * kKeyBlock + j)));
        a1 = _mm512_dpbf16_ps(a1, qb, as_bh(_mm512_loadu_si512(kt2 + i * kKeyBlock + j + 16)));
      }
      _mm512_storeu_ps(s + r * s_stride + j, a0);
      _mm512_storeu_ps(s + r * s_stride + j + 16, a1);
    }
  }
}

// o[r] += sum over key pairs i < kPairs of p2[r][i] . vp[i] (p2: probabilities
// as bfloat16 pairs, rows p_stride pairs apart).
inline void accumulate(float* o, int64_t rows, const uint32_t* p2, int64_t p_stride, const uint32_t* vp, int64_t d) {
  for (int64_t c = 0; c < d; c += 32) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      float* o0 = o + r * d + c;
      __m512 a00 = _mm512_loadu_ps(o0), a01 = _mm512_loadu_ps(o0 + 16);
      __m512 a10 = _mm512_loadu_ps(o0 + d), a11 = _mm512_loadu_ps(o0 + d + 16);
      __m512 a20 = _mm512_loadu_ps(o0 + 2 * d), a21 = _mm512_loadu_ps(o0 + 2 * d + 16);
      __m512 a30 = _mm512_loadu_ps(o0 + 3 * d), a31 = _mm512_loadu_ps(o0 + 3 * d + 16);
      const uint32_t* p0 = p2 + r * p_stride;
      for (int64_t i = 0; i < kPairs; ++i) {
        const __m512bh v0 = as_bh(_mm512_loadu_si512(vp + i * d + c));
        const __m512bh v1 = as_bh(_mm512_loadu_si512(vp + i * d + c + 16));
        __m512bh pb = as_bh(_mm512_set1_epi32(int(p0[i])));
        a00 = _mm512_dpbf16_ps(a00, pb, v0); a01 = _mm512_dpbf16_ps(a01, pb, v1);
        pb = as_bh(_mm512_set1_epi32(int(p0[p_stride + i])));
        a10 = _mm512_dpbf16_ps(a10, pb, v0); a11 = _mm512_dpbf16_ps(a11, pb, v1);
        pb = as_bh(_mm512_set1_epi32(int(p0[2 * p_stride + i])));
        a20 = _mm512_dpbf16_ps(a20, pb, v0); a21 = _mm512_dpbf16_ps(a21, pb, v1);
        pb = as_bh(_mm512_set1_epi32(int(p0[3 * p_stride + i])));
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
        const __m512bh pb = as_bh(_mm512_set1_epi32(int(p2[r * p_stride + i])));
        a0 = _mm512_dpbf16_ps(a0, pb, as_bh(_mm512_loadu_si512(vp + i * d + c)));
        a1 = _mm512_dpbf16_ps(a1, pb, as_bh(_mm512_loadu_si512(vp + i * d + c + 16)));
      }
      _mm512_storeu_ps(orow, a0);
      _mm512_storeu_ps(orow + 16, a1);
    }
  }
}

// How far (in powers of two) a row's scores may rise above the max its
// probabilities are taken against before o and l are rescaled: probabilities
// up to 2^8 are exact enough in float32 and bfloat16, and the rescale (a pass
// over the row of o) then runs only when the max jumps, not on every block.
constexpr float kLazyRescale = 8.f;

// 2^x for finite x <= kLazyRescale, to about 2e-7 relative: 2^n * 2^f with n the
// nearest integer and |f| <= 1/2, 2^f by its degree-6 Taylor polynomial.
// Half the instructions of vexp; prefill rounds the result to bfloat16.
inline __m512 exp2_small(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.5403530e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// Prefill's keys per online-softmax step: kSpan packed blocks of kKeyBlock
// (256 keys). Against one block per step, o's tiles are loaded and stored a
// quarter as often (once per step), and the softmax's per-row costs (the
// row's max and sum across lanes, the rescale test) are spread over four
// times the keys. On the GPU machine's Xeon (B=1, 32/8 heads, T=2048,
// causal): 1.16-1.5x faster than one block per step at 1-16 threads; two
// blocks per step were 3-14% slower than four at 1-8 threads, within 2% at 16.
constexpr int kSpan = 4;
constexpr int64_t kSpanKeys = kSpan * kKeyBlock, kSpanPairs = kSpan * kPairs;

// The online-softmax step of prefill for one span of kSpanKeys scores per
// row (rows kSpanKeys floats apart), a row's scores in registers: scaled to
// base 2 (m and l are kept in that base: exp(x) = 2^(x log2 e)), masked
// (keys j >= visible(r) get no weight), the running max and sum updated, o
// rescaled when the max rose by more than kLazyRescale, and the
// probabilities written as bfloat16 pairs for p.v (p2, kSpanPairs per row).
template <typename Visible>
inline void softmax_rows(const float* s, int64_t rows, Visible&& visible, float scale, float* m, float* l, float* o,
                         int64_t d, uint32_t* p2) {
  constexpr int kVectors = int(kSpanKeys / 16);  // 16 of the 32 vector registers
  const __m512 vscale = _mm512_set1_ps(scale * 1.44269504088896341f), ninf = _mm512_set1_ps(kNegInf);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t lim = visible(r);
    uint32_t* pr = p2 + r * kSpanPairs;
    if (lim <= 0) {  // nothing visible in this span
      std::memset(pr, 0, kSpanPairs * sizeof(uint32_t));
      continue;
    }
    __m512 x[kVectors];
    __mmask16 keep[kVectors];
    __m512 vmax = ninf;
#pragma GCC unroll 16
    for (int i = 0; i < kVectors; ++i) {
      const int64_t left = std::min<int64_t>(16, std::max<int64_t>(0, lim - 16 * i));
      keep[i] = static_cast<__mmask16>((1u << left) - 1u);
      x[i] = _mm512_mask_mul_ps(ninf, keep[i], _mm512_loadu_ps(s + r * kSpanKeys + 16 * i), vscale);
      vmax = _mm512_max_ps(vmax, x[i]);
    }
    const float bm = _mm512_reduce_max_ps(vmax);
    if (!(bm <= m[r] + kLazyRescale)) {  // the first block, or the max rose too far
      const float m_new = std::max(m[r], bm);
      if (m[r] != kNegInf) {
        const float alpha = std::exp2(m[r] - m_new);
        l[r] *= alpha;
        const __m512 va = _mm512_set1_ps(alpha);
        float* orow = o + r * d;
        for (int64_t c = 0; c < d; c += 16) _mm512_storeu_ps(orow + c, _mm512_mul_ps(_mm512_loadu_ps(orow + c), va));
      }
      m[r] = m_new;
    }
    const __m512 vm = _mm512_set1_ps(m[r]);
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < kVectors; ++i) {
      x[i] = _mm512_maskz_mov_ps(keep[i], exp2_small(_mm512_min_ps(_mm512_sub_ps(x[i], vm), _mm512_set1_ps(kLazyRescale))));
      sum = _mm512_add_ps(sum, x[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < kVectors; i += 2) {
      _mm512_storeu_si512(pr + 8 * i, (__m512i)_mm512_cvtne2ps_pbh(x[i + 1], x[i]));
    }
    l[r] += _mm512_reduce_add_ps(sum);
  }
}

#if defined(KP_CPU_AMX)
// Prefill's two products on AMX tiles (the amx level), from the same packed
// operands: q2 rows are tile A for q.k and kt2 (pairs of head_dim x keys) is
// already tile B's VNNI layout; for p.v the probabilities as pairs (p2) are
// A and vp (pairs of keys x columns) is B. Each step is a 2 x 2 block of
// 16 x 16 float C tiles (tiles 0-3) from two A tiles (4, 5) and two B tiles
// (6, 7): four independent products per pair of loads, 32 rows at a time
// (rows past a short last query block compute unused values).
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
  for (int t = 0; t < 8; ++t) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
  _tile_loadconfig(&cfg);
}

inline int64_t padded_rows(int64_t rows) { return (rows + 31) / 32 * 32; }

// s[r][j] = q[r] . k[j], rows padded to 32 (q2 holds that many rows), rows of
// s s_stride floats apart.
inline void scores(float* s, int64_t s_stride, const uint32_t* q2, int64_t rows, const uint32_t* kt2, int64_t half) {
  const int64_t qs = half * 4, ks = kKeyBlock * 4, ss = s_stride * 4;
  for (int64_t r0 = 0; r0 < padded_rows(rows); r0 += 32) {
    for (int64_t j0 = 0; j0 < kKeyBlock; j0 += 32) {
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      for (int64_t c = 0; c < half; c += 16) {
        _tile_loadd(4, q2 + r0 * half + c, qs);
        _tile_loadd(5, q2 + (r0 + 16) * half + c, qs);
        _tile_loadd(6, kt2 + c * kKeyBlock + j0, ks);
        _tile_loadd(7, kt2 + c * kKeyBlock + j0 + 16, ks);
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
      }
      float* s0 = s + r0 * s_stride + j0;
      _tile_stored(0, s0, ss); _tile_stored(1, s0 + 16, ss);
      _tile_stored(2, s0 + 16 * s_stride, ss); _tile_stored(3, s0 + 16 * s_stride + 16, ss);
    }
  }
}

// o[r] += p2[r] . v for rows padded to 32, over the first `pairs` key pairs
// of a span: vp[b] holds pairs [b * kPairs, (b + 1) * kPairs) (p2 rows:
// kSpanPairs).
inline void accumulate(float* o, int64_t rows, const uint32_t* p2, const uint32_t* const* vp, int64_t pairs,
                       int64_t d) {
  const int64_t os = d * int64_t(sizeof(float)), ps = kSpanPairs * 4, vs = d * 4;
  for (int64_t r0 = 0; r0 < padded_rows(rows); r0 += 32) {
    for (int64_t c0 = 0; c0 < d; c0 += 32) {
      float* o0 = o + r0 * d + c0;
      _tile_loadd(0, o0, os); _tile_loadd(1, o0 + 16, os);
      _tile_loadd(2, o0 + 16 * d, os); _tile_loadd(3, o0 + 16 * d + 16, os);
      for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
        const uint32_t* vb = vp[p0 / kPairs] + (p0 % kPairs) * d + c0;
        _tile_loadd(4, p2 + r0 * kSpanPairs + p0, ps);
        _tile_loadd(5, p2 + (r0 + 16) * kSpanPairs + p0, ps);
        _tile_loadd(6, vb, vs);
        _tile_loadd(7, vb + 16, vs);
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, o0, os); _tile_stored(1, o0 + 16, os);
      _tile_stored(2, o0 + 16 * d, os); _tile_stored(3, o0 + 16 * d + 16, os);
    }
  }
}

}  // namespace prefill_tiles
#endif  // KP_CPU_AMX

// Every (batch, kv head)'s keys and values packed once, before the query
// blocks run (a block of 64 keys: kt2 then vp), in parallel over the blocks.
struct PackedKv {
  // Not zeroed on allocation (pack_all writes every element, padding
  // included): a serial memset of the whole buffer cost about 0.5 ms of a
  // 16-thread T=2048 call, and the parallel packing touches its pages first.
  struct Free { void operator()(uint32_t* p) const { ::operator delete[](p, std::align_val_t{64}); } };
  std::unique_ptr<uint32_t[], Free> data;
  int64_t blocks = 0, block_size = 0;
  const uint32_t* kt2(int64_t bk, int64_t blk) const { return data.get() + (bk * blocks + blk) * block_size; }
  const uint32_t* vp(int64_t bk, int64_t blk, int64_t d) const { return kt2(bk, blk) + kKeyBlock * d / 2; }
};

inline void pack_all(PackedKv& p, const kpdrPrefillAttentionArgs& a) {
  const int64_t d = a.head_dim;
  p.blocks = (a.seq_kv + kKeyBlock - 1) / kKeyBlock;
  p.block_size = kKeyBlock * d / 2 + kPairs * d;
  p.data.reset(new (std::align_val_t{64}) uint32_t[a.batch * a.kv_heads * p.blocks * p.block_size]);
  kp::parallel_for(0, a.batch * a.kv_heads * p.blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bk = t / p.blocks, blk = t % p.blocks, b = bk / a.kv_heads, kvh = bk % a.kv_heads;
      const int64_t j0 = blk * kKeyBlock, n = std::min(kKeyBlock, a.seq_kv - j0);
      uint32_t* out = p.data.get() + t * p.block_size;
      pack_k(out, at<BF16>(a.k, b * a.k_stride[0] + kvh * a.k_stride[1]), a.k_stride[2], j0, n, d);
      pack_v(out + kKeyBlock * d / 2, at<BF16>(a.v, b * a.v_stride[0] + kvh * a.v_stride[1]), a.v_stride[2], j0, n, d);
    }
  });
}

// The query block of task t among `qblocks` of a head: cheap (early, few keys
// under a causal mask) and expensive (late) blocks alternate, so any run of
// consecutive tasks (a piece of the parallel range) costs about the same.
inline int64_t interleaved_block(int64_t t, int64_t qblocks) {
  return t % 2 == 0 ? t / 2 : qblocks - 1 - t / 2;
}

inline void tasks(const kpdrPrefillAttentionArgs& a, const PackedKv& kv, int64_t t0, int64_t t1) {
  constexpr int64_t kQueryBlock = 64;
  const int64_t d = a.head_dim, half = d / 2, group = a.heads / a.kv_heads;
  const int64_t qblocks = (a.seq_q + kQueryBlock - 1) / kQueryBlock;
  thread_local AttentionScratch w;
  thread_local LineVector<uint32_t> q2, p2;
  thread_local LineVector<float> s;
  w.reserve(kQueryBlock, d);
  q2.resize(kQueryBlock * half);  // rows past a short block: stale but finite, their results unused
  p2.resize(kQueryBlock * kSpanPairs);
  s.resize(kQueryBlock * kSpanKeys);
  const bool causal = a.causal != 0;
#if defined(KP_CPU_AMX)
  prefill_tiles::configure();
  struct Release { ~Release() { _tile_release(); } } release;
#endif
  for (int64_t task = t0; task < t1; ++task) {
    const int64_t qb = interleaved_block(task % qblocks, qblocks), bh = task / qblocks;
    const int64_t b = bh / a.heads, h = bh % a.heads, kvh = h / group, bk = b * a.kv_heads + kvh;
    const int64_t i0 = qb * kQueryBlock, rows = std::min(kQueryBlock, a.seq_q - i0);
    const BF16* q = at<BF16>(a.q, b * a.q_stride[0] + h * a.q_stride[1]);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(q2.data() + r * half, q + (i0 + r) * a.q_stride[2], half * sizeof(uint32_t));
    }
    reset_state(w, rows, d);
    const int64_t diag = i0 + (a.seq_kv - a.seq_q);
    // Keys [0, end) are visible to some row of the block.
    const int64_t end = causal ? std::min(a.seq_kv, std::max<int64_t>(0, diag + rows)) : a.seq_kv;
    for (int64_t j0 = 0; j0 < end; j0 += kSpanKeys) {
      const int64_t n = std::min(kSpanKeys, a.seq_kv - j0);
      // The span's blocks that hold visible keys: the scores of the others
      // stay stale and masked, and p.v skips their pairs.
      const int64_t blocks = std::min<int64_t>(kSpan, (end - j0 + kKeyBlock - 1) / kKeyBlock);
      const uint32_t* vp[kSpan];
      for (int64_t i = 0; i < kSpan; ++i) {
        const int64_t blk = j0 / kKeyBlock + std::min<int64_t>(i, blocks - 1);
        vp[i] = kv.vp(bk, blk, d);
        if (i >= blocks) continue;
#if defined(KP_CPU_AMX)
        prefill_tiles::scores(s.data() + i * kKeyBlock, kSpanKeys, q2.data(), rows, kv.kt2(bk, blk), half);
#else
        scores(s.data() + i * kKeyBlock, kSpanKeys, q2.data(), rows, kv.kt2(bk, blk), half);
#endif
      }
      // Padding keys, and keys the causal mask hides, get no weight.
      softmax_rows(s.data(), rows, [&](int64_t r) {
        return causal ? std::min(n, std::max<int64_t>(0, r + diag + 1 - j0)) : n;
      }, a.scale, w.m.data(), w.l.data(), w.o.data(), d, p2.data());
#if defined(KP_CPU_AMX)
      prefill_tiles::accumulate(w.o.data(), rows, p2.data(), vp, blocks * kPairs, d);
#else
      for (int64_t i = 0; i < blocks; ++i) accumulate(w.o.data(), rows, p2.data() + i * kPairs, kSpanPairs, vp[i], d);
#endif
    }
    for (int64_t r = 0; r < rows; ++r) {
      BF16* out = at<BF16>(a.out, b * a.out_stride[0] + h * a.out_stride[1] + (i0 + r) * a.out_stride[2]);
      store_normalised(out, w.o.data() + r * d, w.l[r], d);
    }
  }
}

}  // namespace bf16dp
#endif  // KP_VEC_AVX512_BF16

#if defined(KP_VEC_AVX512)
// --- decode: one query row per head of a kv group, keys read once ---------
//
// bfloat16 decode at every AVX-512 level (head_dim a multiple of 32). A
// bfloat16 row read as 32-bit lanes holds column 2i in the low half and 2i + 1
// in the high half of lane i, so a shift and a mask widen 32 columns into two
// float vectors (the even columns and the odd ones) with no shuffle.
//
// q.k, by the best the CPU has (QkPath): at amx, tile products of the cached
// key rows (tile A, in place) with the group's queries (tile B, kept in tile
// registers for the whole chunk); with AVX512-BF16, each key's dot product
// with a row is d / 32 vdpbf16ps into one vector of 16 partial sums; with
// AVX-512 alone, each key row is widened once and multiplied by every query
// row (kept widened in the same even / odd order, pre-scaled) with float32
// FMAs. Either of the last two sums 16 vectors of partial sums across lanes
// together (reduce16: 45 shuffles and adds, where one horizontal sum per key
// and row costs about 10), giving 16 scores as one vector. (On the
// development machine, AVX-512 without BF16, one thread, of clone: B=1 / B=8
// at T=4096 0.40 / 0.54 -> 0.58 / 0.78 against the float32 kernel's
// conversion of keys and values to float rows; its 64 float32 FMAs per key
// and kv head, at the 0.44 ns each measured there, are 87% of its time.)
//
// p.v by float32 FMA at every level: the value row widened the same way, and
// each query row then costs one FMA per 16 columns with the probability
// broadcast from memory. (On the GPU machine's Xeon, one thread, B=1
// T=4096, with AMX q.k: 39 ns per key, against 43 with vdpbf16ps on value
// rows interleaved in registers and 52 for AMX p.v through an interleaving
// buffer, the previous kernel.) The accumulator row holds each 32 columns as
// the 16 even then the 16 odd ones (the order widen_row gives the queries),
// put back in order once per chunk (unwiden_row).
namespace bf16_decode {

#if defined(KP_VEC_AVX512_BF16)
using bf16dp::as_bh;
#endif
#if defined(KP_CPU_AMX)
using bf16dp::TileConfig;
#endif

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

#if defined(KP_VEC_AVX512_BF16)
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
#endif  // KP_VEC_AVX512_BF16

// s[r][kk] = qw_r . k_kk for R query rows and the K = 16 / R keys keys[0..K-1]
// (rows of d bfloat16), by float32 FMAs: qw holds the rows widened
// (widen_row) and pre-scaled, d floats apart. Each key row is widened
// once for all R rows; the R x K dot products are 16 vectors of partial sums,
// summed across lanes by one reduce16 (lane r * K + kk is row r, key kk).
template <int R>
inline void decode_scores_widen(float* s, int64_t s_stride, const float* qw, const BF16* const* keys, int64_t d) {
  static_assert(R == 1 || R == 2 || R == 4, "16 / R keys per step");
  constexpr int K = 16 / R;
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 32) {
#pragma GCC unroll 16
    for (int kk = 0; kk < K; ++kk) {
      Vec even, odd;
      Vec::load_deinterleaved(keys[kk] + c, even, odd);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m512& a = acc[kReduceSource[r * K + kk]];
        a = _mm512_fmadd_ps(_mm512_loadu_ps(qw + r * d + c), even.v, a);
        a = _mm512_fmadd_ps(_mm512_loadu_ps(qw + r * d + c + 16), odd.v, a);
      }
    }
  }
  const __m512 sums = reduce16(acc);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    // Lanes [r * K, r * K + K) land at s[r][0..K-1].
    _mm512_mask_storeu_ps(s + r * (s_stride - K), __mmask16(((1u << K) - 1) << (r * K)), sums);
  }
}

// out = scale * x (d bfloat16, d % 32 == 0) in widened order: per 32
// columns, the 16 even ones, then the 16 odd ones.
inline void widen_row(float* out, const BF16* x, int64_t d, float scale) {
  const Vec vs = Vec::set1(scale);
  for (int64_t c = 0; c < d; c += 32) {
    Vec even, odd;
    Vec::load_deinterleaved(x + c, even, odd);
    (even * vs).store(out + c);
    (odd * vs).store(out + c + 16);
  }
}

// A row of d floats (d % 32 == 0) from widened order back to column order, in place.
inline void unwiden_row(float* o, int64_t d) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int64_t c = 0; c < d; c += 32) {
    const __m512 even = _mm512_loadu_ps(o + c), odd = _mm512_loadu_ps(o + c + 16);
    _mm512_storeu_ps(o + c, _mm512_permutex2var_ps(even, lo, odd));
    _mm512_storeu_ps(o + c + 16, _mm512_permutex2var_ps(even, hi, odd));
  }
}

// The next key block's rows (keys and values, `count` of them), asked into L2
// while this block's p.v runs: decode's arithmetic fills the out-of-order
// window, so its own loads keep too few lines in flight for one core (the
// row kernels' finding, common.h prefetch_lines).
struct NextBlock {
  const BF16* k = nullptr;
  int64_t k_stride = 0;
  const BF16* v = nullptr;
  int64_t v_stride = 0;
  int64_t count = 0;
};

// o[r] += sum over keys j < n of p[r][j] * v[j] for R rows and CG * 32
// columns from c (widened order); the same columns of the next block's key j
// and value j are prefetched as key j is done.
template <int R, int CG>
inline void pv_widen_tile(float* o, int64_t d, int64_t c, const float* p, int64_t p_stride, const BF16* v,
                          int64_t v_stride, int64_t n, const NextBlock& next) {
  __m512 acc[R][2 * CG];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < 2 * CG; ++g) acc[r][g] = _mm512_loadu_ps(o + r * d + c + 16 * g);
  const BF16* vj = v + c;
  for (int64_t j = 0; j < n; ++j, vj += v_stride) {
    if (j < next.count) {
      prefetch_lines(next.k + j * next.k_stride + c, 64 * CG);
      prefetch_lines(next.v + j * next.v_stride + c, 64 * CG);
    }
    Vec x[2 * CG];
#pragma GCC unroll 16
    for (int g = 0; g < CG; ++g) Vec::load_deinterleaved(vj + 32 * g, x[2 * g], x[2 * g + 1]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 pr = _mm512_set1_ps(p[r * p_stride + j]);
#pragma GCC unroll 16
      for (int g = 0; g < 2 * CG; ++g) acc[r][g] = _mm512_fmadd_ps(pr, x[g].v, acc[r][g]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int g = 0; g < 2 * CG; ++g) _mm512_storeu_ps(o + r * d + c + 16 * g, acc[r][g]);
}

template <int R>
inline void pv_widen_rows(float* o, int64_t d, const float* p, int64_t p_stride, const BF16* v, int64_t v_stride,
                          int64_t n, const NextBlock& next = NextBlock{}) {
  int64_t c = 0;
  for (; c + 64 <= d; c += 64) pv_widen_tile<R, 2>(o, d, c, p, p_stride, v, v_stride, n, next);
  if (c < d) pv_widen_tile<R, 1>(o, d, c, p, p_stride, v, v_stride, n, next);
}

#if defined(KP_CPU_AMX)
// q.k on tiles, 32 keys per step: C tiles 0 and 1 (16 keys x group floats
// each), A tiles 2 and 3 (the two 16-key halves, 32 bfloat16 of head_dim, in
// place in the cache), B tiles 4-7 the group's queries for each 32 elements
// of head_dim (head_dim <= 128), loaded once per chunk.
namespace amx_decode {

inline bool usable(int64_t group, int64_t d) { return group <= 16 && d <= 128; }

inline void configure(int64_t group) {
  TileConfig cfg{};
  cfg.palette = 1;
  const auto g4 = static_cast<uint16_t>(group * 4);
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = (t == 2 || t == 3) ? 64 : g4;
  }
  _tile_loadconfig(&cfg);
}

// qb as amx_tiles::pack_queries lays it out: 16 pairs x group per 32 elements.
inline void load_queries(const uint32_t* qb, int64_t group, int64_t d) {
  const int64_t step = 16 * group, stride = group * 4;
  _tile_loadd(4, qb, stride);
  if (d > 32) _tile_loadd(5, qb + step, stride);
  if (d > 64) _tile_loadd(6, qb + 2 * step, stride);
  if (d > 96) _tile_loadd(7, qb + 3 * step, stride);
}

// c[j][g] = q_g . k_j for the 32 keys from `keys` (rows `stride` elements
// apart, all 32 readable).
inline void scores32(float* c, const BF16* keys, int64_t stride, int64_t group, int64_t d) {
  const int64_t bs = stride * int64_t(sizeof(BF16));
  const BF16* upper = keys + 16 * stride;
  _tile_zero(0);
  _tile_zero(1);
  _tile_loadd(2, keys, bs); _tile_loadd(3, upper, bs);
  _tile_dpbf16ps(0, 2, 4); _tile_dpbf16ps(1, 3, 4);
  if (d > 32) {
    _tile_loadd(2, keys + 32, bs); _tile_loadd(3, upper + 32, bs);
    _tile_dpbf16ps(0, 2, 5); _tile_dpbf16ps(1, 3, 5);
  }
  if (d > 64) {
    _tile_loadd(2, keys + 64, bs); _tile_loadd(3, upper + 64, bs);
    _tile_dpbf16ps(0, 2, 6); _tile_dpbf16ps(1, 3, 6);
  }
  if (d > 96) {
    _tile_loadd(2, keys + 96, bs); _tile_loadd(3, upper + 96, bs);
    _tile_dpbf16ps(0, 2, 7); _tile_dpbf16ps(1, 3, 7);
  }
  _tile_stored(0, c, group * 4);
  _tile_stored(1, c + 16 * group, group * 4);
}

}  // namespace amx_decode
#endif  // KP_CPU_AMX

// Work space of one decode task, kept per thread.
struct DecodeScratch {
  LineVector<float> s, o, c, m, l, qw;
  LineVector<uint32_t> qb;
  LineVector<BF16> zeros, tail;
  void reserve(int64_t group, int64_t d) {
    if (static_cast<int64_t>(o.size()) == group * d && static_cast<int64_t>(zeros.size()) == d) return;
    s.assign(group * kKeyBlock, 0.f);
    o.resize(group * d);
    c.assign(kKeyBlock * group, 0.f);
    m.resize(group);
    l.resize(group);
    qw.resize(group * d);
    qb.resize(group * d / 2);
    zeros.assign(d, BF16{0});
    tail.assign(32 * d, BF16{0});
  }
};

// How decode computes q.k (the header of this section).
enum class QkPath { kWidenFma, kDotBf16, kTiles };

// Attention of the `group` query heads of kv head kvh (batch b) over keys
// [j0, j1), bfloat16 with head_dim % 32 == 0: leaves m, l and o (column
// order) in w.
template <QkPath kQk>
inline void decode_chunk(const kpdrDecodeAttentionArgs& a, int64_t b, int64_t kvh, int64_t j0, int64_t j1,
                          DecodeScratch& w) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  w.reserve(group, d);
  std::fill(w.o.begin(), w.o.end(), 0.f);
  std::fill(w.m.begin(), w.m.end(), kNegInf);
  std::fill(w.l.begin(), w.l.end(), 0.f);
  const BF16* k = at<BF16>(a.k, b * a.k_stride[0] + kvh * a.k_stride[1]);
  const BF16* v = at<BF16>(a.v, b * a.v_stride[0] + kvh * a.v_stride[1]);
  const int64_t ks = a.k_stride[2], vs = a.v_stride[2];
  const BF16* q0 = at<BF16>(a.q, b * a.q_stride[0] + kvh * group * a.q_stride[1]);
  float* s = w.s.data();
  if constexpr (kQk == QkPath::kWidenFma) {
    for (int64_t g = 0; g < group; ++g) widen_row(w.qw.data() + g * d, q0 + g * a.q_stride[1], d, a.scale);
  }
#if defined(KP_CPU_AMX)
  if constexpr (kQk == QkPath::kTiles) {
    for (int64_t c = 0; c < d / 32; ++c)
      for (int64_t i = 0; i < 16; ++i)
        for (int64_t g = 0; g < group; ++g)
          std::memcpy(&w.qb[(c * 16 + i) * group + g], q0 + g * a.q_stride[1] + 32 * c + 2 * i, 4);
    amx_decode::configure(group);
    amx_decode::load_queries(w.qb.data(), group, d);
  }
#endif
  for (int64_t b0 = j0; b0 < j1; b0 += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, j1 - b0);
#if defined(KP_CPU_AMX)
    if constexpr (kQk == QkPath::kTiles) {
      for (int64_t j = 0; j < n; j += 32) {
        const BF16* rows = k + (b0 + j) * ks;
        int64_t stride = ks;
        if (n - j < 32) {  // the tiles read 32 rows: copy the last few
          for (int64_t r = 0; r < n - j; ++r) std::memcpy(w.tail.data() + r * d, rows + r * ks, d * sizeof(BF16));
          rows = w.tail.data();
          stride = d;
        }
        amx_decode::scores32(w.c.data() + j * group, rows, stride, group, d);
      }
      // c is keys x group: gather each query head's scores, scaled.
      const __m512 vs16 = _mm512_set1_ps(a.scale);
      const __m512i keys16 = _mm512_mullo_epi32(
          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(int(group)));
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t j = 0; j < n; j += 16) {
          const __m512i idx = _mm512_add_epi32(keys16, _mm512_set1_epi32(int(j * group + g)));
          _mm512_storeu_ps(s + g * kKeyBlock + j, _mm512_mul_ps(_mm512_i32gather_ps(idx, w.c.data(), 4), vs16));
        }
      }
    } else
#endif
#if defined(KP_VEC_AVX512_BF16)
    if constexpr (kQk == QkPath::kDotBf16) {
      const BF16* keys[16];
      for (int64_t j = 0; j < n; j += 16) {
        for (int64_t i = 0; i < 16; ++i) keys[i] = j + i < n ? k + (b0 + j + i) * ks : w.zeros.data();
        for (int64_t g = 0; g < group; ++g) decode_scores16(s + g * kKeyBlock + j, q0 + g * a.q_stride[1], keys, d, a.scale);
      }
    } else
#endif
    {
      // Rows in steps of 4, then 2 and 1: 16 / R keys per reduce16.
      const BF16* keys[16];
      auto rows = [&](auto r_const, int64_t g) {
        constexpr int R = decltype(r_const)::value, K = 16 / R;
        for (int64_t j = 0; j < n; j += K) {
          for (int64_t i = 0; i < K; ++i) keys[i] = j + i < n ? k + (b0 + j + i) * ks : w.zeros.data();
          decode_scores_widen<R>(s + g * kKeyBlock + j, kKeyBlock, w.qw.data() + g * d, keys, d);
        }
      };
      int64_t g = 0;
      for (; g + 4 <= group; g += 4) rows(std::integral_constant<int, 4>{}, g);
      for (; g + 2 <= group; g += 2) rows(std::integral_constant<int, 2>{}, g);
      for (; g < group; ++g) rows(std::integral_constant<int, 1>{}, g);
    }
    online_softmax_block(s, kKeyBlock, group, n, w.m.data(), w.l.data(), w.o.data(), d);
    const BF16* vb0 = v + b0 * vs;
    NextBlock next;  // handed to the first row group only (one prefetch per line)
    if (b0 + kKeyBlock < j1) {
      next = NextBlock{k + (b0 + kKeyBlock) * ks, ks, v + (b0 + kKeyBlock) * vs, vs,
                       std::min(kKeyBlock, j1 - (b0 + kKeyBlock))};
    }
    int64_t r = 0;
    for (; r + 4 <= group; r += 4) {
      pv_widen_rows<4>(w.o.data() + r * d, d, s + r * kKeyBlock, kKeyBlock, vb0, vs, n, next);
      next.count = 0;
    }
    float* o = w.o.data() + r * d;
    const float* pr = s + r * kKeyBlock;
    switch (group - r) {
      case 3: pv_widen_rows<3>(o, d, pr, kKeyBlock, vb0, vs, n, next); break;
      case 2: pv_widen_rows<2>(o, d, pr, kKeyBlock, vb0, vs, n, next); break;
      case 1: pv_widen_rows<1>(o, d, pr, kKeyBlock, vb0, vs, n, next); break;
      default: break;
    }
  }
#if defined(KP_CPU_AMX)
  if constexpr (kQk == QkPath::kTiles) _tile_release();
#endif
  for (int64_t g = 0; g < group; ++g) unwiden_row(w.o.data() + g * d, d);
}

}  // namespace bf16_decode
#endif  // KP_VEC_AVX512

void prefill_attention(const kpdrPrefillAttentionArgs& a) {
  const int64_t qblocks = (a.seq_q + 63) / 64;
#if defined(KP_VEC_AVX512_BF16)
  if (a.dtype == KPDR_DTYPE_BFLOAT16 && a.head_dim % 32 == 0) {
    bf16dp::PackedKv kv;
    bf16dp::pack_all(kv, a);
    kp::parallel_for(0, a.batch * a.heads * qblocks, 1,
                     [&](int64_t b, int64_t e) { bf16dp::tasks(a, kv, b, e); });
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

// Split-K over the cache: enough chunks for four tasks per thread of the pool
// (so B = 1 uses every core and uneven lengths still balance), none shorter
// than 256 keys. chunk(b, kvh, j0, j1) attends the group of kv head kvh over
// keys [j0, j1) and returns its m, l (one per row) and o rows (column order,
// unnormalised). Each chunk's result goes to `partial`; the task that
// finishes the last chunk of a (batch, kv head) merges its chunks and writes
// the outputs, in the same parallel region (no second region to wake the
// pool for, no wait for the slowest head before any merge starts).
struct ChunkResult {
  const float* m;
  const float* l;
  const float* o;
};

template <typename T, typename Chunk>
void decode_split_k(const kpdrDecodeAttentionArgs& a, Chunk&& chunk) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  const int64_t heads_total = a.batch * a.kv_heads;
  constexpr int64_t kMinChunk = 256;
  const int64_t want_tasks = 4 * std::max(16, kp::pool_threads());
  int64_t splits = std::max<int64_t>(1, std::min<int64_t>(
      (a.cache_len + kMinChunk - 1) / kMinChunk, (want_tasks + heads_total - 1) / heads_total));
  const int64_t chunk_len = (a.cache_len + splits - 1) / splits;
  splits = (a.cache_len + chunk_len - 1) / chunk_len;
  auto write = [&](int64_t b, int64_t kvh, int64_t g, const float* o, float l) {
    T* out = at<T>(a.out, b * a.out_stride[0] + (kvh * group + g) * a.out_stride[1]);
    store_normalised(out, o, l, d);
  };
  if (splits == 1) {
    kp::parallel_for(0, heads_total, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t bk = t0; bk < t1; ++bk) {
        const int64_t b = bk / a.kv_heads, kvh = bk % a.kv_heads;
        const int64_t len = a.lengths ? a.lengths[b] : a.cache_len;
        const ChunkResult r = chunk(b, kvh, int64_t(0), len);
        for (int64_t g = 0; g < group; ++g) write(b, kvh, g, r.o + g * d, r.l[g]);
      }
    });
    return;
  }
  // Per (batch, kv head, split): m and l per row, then o rows.
  const int64_t part = group * (2 + d);
  std::vector<float> partial(heads_total * splits * part);
  std::unique_ptr<std::atomic<int64_t>[]> finished(new std::atomic<int64_t>[heads_total]);
  for (int64_t i = 0; i < heads_total; ++i) finished[i].store(0, std::memory_order_relaxed);
  kp::parallel_for(0, heads_total * splits, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> o(d);
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t split = task % splits, bk = task / splits;
      const int64_t b = bk / a.kv_heads, kvh = bk % a.kv_heads;
      const int64_t len = a.lengths ? a.lengths[b] : a.cache_len;
      const int64_t j0 = split * chunk_len, j1 = std::min(len, j0 + chunk_len);
      float* p = partial.data() + task * part;
      if (j0 >= j1) {
        for (int64_t g = 0; g < group; ++g) { p[g] = kNegInf; p[group + g] = 0.f; }
      } else {
        const ChunkResult r = chunk(b, kvh, j0, j1);
        std::copy(r.m, r.m + group, p);
        std::copy(r.l, r.l + group, p + group);
        std::copy(r.o, r.o + group * d, p + 2 * group);
      }
      if (finished[bk].fetch_add(1, std::memory_order_acq_rel) != splits - 1) continue;
      const float* first = partial.data() + bk * splits * part;
      for (int64_t g = 0; g < group; ++g) {
        float m = kNegInf;
        for (int64_t s = 0; s < splits; ++s) m = std::max(m, first[s * part + g]);
        float l = 0.f;
        std::fill(o.begin(), o.end(), 0.f);
        for (int64_t s = 0; s < splits; ++s) {
          const float* ps = first + s * part;
          if (ps[g] == kNegInf) continue;
          const float f = sexp(ps[g] - m);
          l += ps[group + g] * f;
          const Vec vf = Vec::set1(f);
          const float* po = ps + 2 * group + g * d;
          int64_t c = 0;
          for (; c + W <= d; c += W) Vec::fmadd(Vec::load(po + c), vf, Vec::load(o.data() + c)).store(o.data() + c);
          for (; c < d; ++c) o[c] += po[c] * f;
        }
        write(b, kvh, g, o.data(), l);
      }
    }
  });
}

void decode_attention(const kpdrDecodeAttentionArgs& a) {
  const int64_t d = a.head_dim;
#if defined(KP_VEC_AVX512)
  if (a.dtype == KPDR_DTYPE_BFLOAT16 && d % 32 == 0) {
    using bf16_decode::QkPath;
    auto run = [&](auto path) {
      decode_split_k<BF16>(a, [&](int64_t b, int64_t kvh, int64_t j0, int64_t j1) {
        thread_local bf16_decode::DecodeScratch w;
        bf16_decode::decode_chunk<decltype(path)::value>(a, b, kvh, j0, j1, w);
        return ChunkResult{w.m.data(), w.l.data(), w.o.data()};
      });
    };
#if defined(KP_CPU_AMX)
    if (bf16_decode::amx_decode::usable(a.heads / a.kv_heads, d)) {
      run(std::integral_constant<QkPath, QkPath::kTiles>{});
      return;
    }
#endif
#if defined(KP_VEC_AVX512_BF16)
    run(std::integral_constant<QkPath, QkPath::kDotBf16>{});
#else
    run(std::integral_constant<QkPath, QkPath::kWidenFma>{});
#endif
    return;
  }
#endif
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    decode_split_k<T>(a, [&](int64_t b, int64_t kvh, int64_t j0, int64_t j1) {
      thread_local AttentionScratch w;
      w.reserve(a.heads / a.kv_heads, d);
      decode_chunk<T>(a, b, kvh, j0, j1, w);
      return ChunkResult{w.m.data(), w.l.data(), w.o.data()};
    });
  });
}

}  // namespace kp::cpu::KP_CPU_CAPABILITY
