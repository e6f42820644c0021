// Vec: a SIMD register of float lanes for one CPU ISA level, with loads and
// stores from every storage type (float, bfloat16, float16). Included (by
// common.h) in per_isa/<family>.cpp, compiled with KP_CPU_CAPABILITY (the
// namespace, so each level's code stays distinct for the linker) and one of
// KP_VEC_AVX512, KP_VEC_AVX2 (else the portable version, which compilers
// auto-vectorise) defined by build_support/native.py.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(KP_VEC_AVX512) || defined(KP_VEC_AVX2)
#include <immintrin.h>
#endif

#include "kernels/cpu/scalar.h"

namespace kp::cpu::KP_CPU_CAPABILITY {

#if defined(KP_VEC_AVX512)

struct Vec {
  static constexpr int kSize = 16;
  // a / b is cheaper than a * b.reciprocal() where the divider runs beside the
  // FMA pipes: silu_and_mul bfloat16 ran 10% faster with vdivps on Zen 4 (and
  // the quotient is correctly rounded).
  static constexpr bool kDivideIsCheap = true;
#if defined(KP_VEC_AVX512_BF16)
  // vfpclassps categories: quiet NaN | denormal | signalling NaN.
  static constexpr int kDenormalOrNan = 0x01 | 0x20 | 0x80;
#endif
  __m512 v;
  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec set1(float f) { return {_mm512_set1_ps(f)}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load(const BF16* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
  }
  static Vec load(const Half* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  // Round to nearest even; NaN becomes 0x7FC0 (the quiet NaN c10::BFloat16
  // gives). Denormal inputs are rounded like any other value, as torch does.
  __m256i bf16_bits() const {
#if defined(KP_VEC_AVX512_BF16)
    // vcvtneps2bf16 rounds to nearest even in one instruction, but treats a
    // denormal input as zero and keeps a NaN's sign and payload. A vector with
    // such a lane (never, in practice) takes the exact arithmetic below, so
    // every level writes the same bits.
    if (_mm512_fpclass_ps_mask(v, kDenormalOrNan) == 0) {
      return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    }
#endif
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_blend_epi32(nan, r, _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(r);
  }
  __m256i half_bits() const { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  void store(BF16* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits()); }
  void store(Half* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), half_bits()); }
  // Non-temporal stores (p aligned to kSize elements): the line goes to memory
  // without first being read into the cache. Call fence() before other threads
  // may read what was written.
  void stream(float* p) const { _mm512_stream_ps(p, v); }
  void stream(BF16* p) const { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), bf16_bits()); }
  void stream(Half* p) const { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), half_bits()); }
  static void fence() { _mm_sfence(); }
  // 2 * kSize bfloat16 as two vectors, the even elements and the odd ones:
  // one load, a shift and a mask (no widening shuffle). For element-wise
  // kernels, which do not care about lane order.
  static void load_deinterleaved(const BF16* p, Vec& even, Vec& odd) {
    const __m512i w = _mm512_loadu_si512(p);
    even = {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
    odd = {_mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int(0xFFFF0000u))))};
  }
  // The inverse, rounding to nearest even (p aligned to 64 bytes when
  // streaming). With AVX512-BF16 one vcvtne2ps2bf16 and one vpermw put the
  // 2 * kSize rounded elements back in order; lanes that vcvtne2ps2bf16 would
  // get wrong (denormal, NaN) take scalar rounding. Without it, the rounding
  // is integer arithmetic on both vectors (3 instructions each: u + 0x7FFF +
  // the lowest kept bit) and the high halves are merged by one shift and one
  // vpternlogd, which needs no shuffle since the pairs are already in order;
  // a NaN lane takes scalar rounding (0x7FC0, as c10::BFloat16).
  static void store_interleaved(BF16* p, Vec even, Vec odd, bool stream) {
    __m512i w;
    if (!pack_interleaved(even, odd, w)) {
      alignas(64) float e[kSize], o[kSize];
      even.store(e);
      odd.store(o);
      for (int i = 0; i < kSize; ++i) {
        p[2 * i] = from_float<BF16>(e[i]);
        p[2 * i + 1] = from_float<BF16>(o[i]);
      }
      return;
    }
    if (stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(p), w);
    else _mm512_storeu_si512(p, w);
  }
  // The 2 * kSize bfloat16 of store_interleaved in *w; false (and *w unset)
  // where a lane needs the scalar rounding.
  static bool pack_interleaved(Vec even, Vec odd, __m512i& w) {
#if defined(KP_VEC_AVX512_BF16)
    if ((_mm512_fpclass_ps_mask(even.v, kDenormalOrNan) | _mm512_fpclass_ps_mask(odd.v, kDenormalOrNan)) != 0) return false;
    // Word i of the packed vector is even[i] for i < 16, odd[i - 16] above.
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                           23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    w = _mm512_permutexvar_epi16(order, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd.v, even.v)));
#else
    if ((_mm512_cmp_ps_mask(even.v, even.v, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(odd.v, odd.v, _CMP_UNORD_Q)) != 0) return false;
    const __m512i e = round_to_bf16_high(_mm512_castps_si512(even.v));
    const __m512i o = round_to_bf16_high(_mm512_castps_si512(odd.v));
    // (o & 0xFFFF0000) | (e >> 16): vpternlogd with the mask as selector.
    w = _mm512_ternarylogic_epi32(_mm512_set1_epi32(int(0xFFFF0000u)), o, _mm512_srli_epi32(e, 16), 0xCA);
#endif
    return true;
  }
  // The even and odd elements of 2 * kSize packed bfloat16 (load_deinterleaved of a register).
  static void unpack_interleaved(__m512i w, Vec& even, Vec& odd) {
    even = {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
    odd = {_mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int(0xFFFF0000u))))};
  }
#if !defined(KP_VEC_AVX512_BF16)
  // The bits of a non-NaN float rounded to nearest even at bfloat16's
  // precision, in the high 16 bits (the low ones are garbage).
  static __m512i round_to_bf16_high(__m512i u) {
    const __mmask16 odd_lsb = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x10000));
    const __m512i r = _mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF));
    return _mm512_mask_add_epi32(r, odd_lsb, r, _mm512_set1_epi32(1));
  }
#endif
  Vec operator+(Vec b) const { return {_mm512_add_ps(v, b.v)}; }
  Vec operator-(Vec b) const { return {_mm512_sub_ps(v, b.v)}; }
  Vec operator*(Vec b) const { return {_mm512_mul_ps(v, b.v)}; }
  Vec operator/(Vec b) const { return {_mm512_div_ps(v, b.v)}; }
  static Vec fmadd(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  // c - a * b and -(a * b) - c, one rounding each.
  static Vec fnmadd(Vec a, Vec b, Vec c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }
  static Vec fnmsub(Vec a, Vec b, Vec c) { return {_mm512_fnmsub_ps(a.v, b.v, c.v)}; }
  static Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
  static Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
  // a clamped to [-limit, limit] (limit > 0); NaN stays NaN. One vrangeps:
  // the smaller magnitude, with a's sign.
  static Vec clamp_magnitude(Vec a, float limit) { return {_mm512_range_ps(a.v, _mm512_set1_ps(limit), 0x06)}; }
  static Vec floor(Vec a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)}; }
  static Vec round_nearest(Vec a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
  // a * 2^n for integral n (one instruction here).
  static Vec ldexp(Vec a, Vec n) { return {_mm512_scalef_ps(a.v, n.v)}; }
  // 2^n for integral n in [-127, 127].
  static Vec exp2_int(Vec n) {
    __m512i i = _mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(i, 23))};
  }
  // Lanes of a below `limit` become 0, the others keep `value`.
  static Vec zero_where_below(Vec a, float limit, Vec value) {
    __mmask16 m = _mm512_cmp_ps_mask(a.v, _mm512_set1_ps(limit), _CMP_LT_OQ);
    return {_mm512_maskz_mov_ps(static_cast<__mmask16>(~m), value.v)};
  }
  // (a0, a1, a2, a3, ...) -> (a1, a0, a3, a2, ...)
  Vec swap_pairs() const { return {_mm512_permute_ps(v, 0xB1)}; }
  // 1 / v to about 1 ulp: a 14-bit estimate and one Newton step (no divide).
  Vec reciprocal() const {
    __m512 r = _mm512_rcp14_ps(v);
    return {_mm512_mul_ps(r, _mm512_fnmadd_ps(v, r, _mm512_set1_ps(2.f)))};
  }
  float reduce_add() const { return _mm512_reduce_add_ps(v); }
  float reduce_max() const { return _mm512_reduce_max_ps(v); }
};

#elif defined(KP_VEC_AVX2)

struct Vec {
  static constexpr int kSize = 8;
  // vdivps ymm has a throughput of one per 5-13 cycles on AVX2 CPUs.
  static constexpr bool kDivideIsCheap = false;
  __m256 v;
  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec set1(float f) { return {_mm256_set1_ps(f)}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec load(const BF16* p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
  static Vec load(const Half* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  __m128i bf16_bits() const {
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r),
                                             _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC0)), nan));
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  }
  __m128i half_bits() const { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  void store(BF16* p) const { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), bf16_bits()); }
  void store(Half* p) const { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), half_bits()); }
  void stream(float* p) const { _mm256_stream_ps(p, v); }
  void stream(BF16* p) const { _mm_stream_si128(reinterpret_cast<__m128i*>(p), bf16_bits()); }
  void stream(Half* p) const { _mm_stream_si128(reinterpret_cast<__m128i*>(p), half_bits()); }
  static void fence() { _mm_sfence(); }
  Vec operator+(Vec b) const { return {_mm256_add_ps(v, b.v)}; }
  Vec operator-(Vec b) const { return {_mm256_sub_ps(v, b.v)}; }
  Vec operator*(Vec b) const { return {_mm256_mul_ps(v, b.v)}; }
  Vec operator/(Vec b) const { return {_mm256_div_ps(v, b.v)}; }
  static Vec fmadd(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec fnmadd(Vec a, Vec b, Vec c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }
  static Vec fnmsub(Vec a, Vec b, Vec c) { return {_mm256_fnmsub_ps(a.v, b.v, c.v)}; }
  static Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
  static Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
  // The constant first: min/max return their second operand when one is NaN,
  // so NaN is kept.
  static Vec clamp_magnitude(Vec a, float limit) {
    return {_mm256_min_ps(_mm256_set1_ps(limit), _mm256_max_ps(_mm256_set1_ps(-limit), a.v))};
  }
  static Vec floor(Vec a) { return {_mm256_floor_ps(a.v)}; }
  static Vec round_nearest(Vec a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
  // a * 2^n for integral n in [-127, 127].
  static Vec ldexp(Vec a, Vec n) { return a * exp2_int(n); }
  static Vec exp2_int(Vec n) {
    __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(i, 23))};
  }
  static Vec zero_where_below(Vec a, float limit, Vec value) {
    __m256 m = _mm256_cmp_ps(a.v, _mm256_set1_ps(limit), _CMP_LT_OQ);
    return {_mm256_andnot_ps(m, value.v)};
  }
  Vec swap_pairs() const { return {_mm256_permute_ps(v, 0xB1)}; }
  // 1 / v to about 1 ulp: a 12-bit estimate and two Newton steps (no divide),
  // each r + r (1 - v r) with the residual exact (fma). One step leaves ~2^-24
  // (the estimate's error squared), which misses exact results such as 1 / 2
  // that silu(x) = x / 2 for tiny x relies on; so does r (2 - v r), whose
  // 2 - v r rounds the correction away.
  Vec reciprocal() const {
    const __m256 one = _mm256_set1_ps(1.f);
    __m256 r = _mm256_rcp_ps(v);
    r = _mm256_fmadd_ps(r, _mm256_fnmadd_ps(v, r, one), r);
    return {_mm256_fmadd_ps(r, _mm256_fnmadd_ps(v, r, one), r)};
  }
  float reduce_add() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  float reduce_max() const {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
};

#else  // portable

struct Vec {
  static constexpr int kSize = 8;
  static constexpr bool kDivideIsCheap = true;  // reciprocal() divides anyway
  float v[kSize];
  static Vec zero() { return set1(0.f); }
  static Vec set1(float f) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = f; return r; }
  template <typename T> static Vec load(const T* p) {
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = to_float(p[i]); return r;
  }
  template <typename T> void store(T* p) const {
    for (int i = 0; i < kSize; ++i) p[i] = from_float<T>(v[i]);
  }
  // No portable non-temporal store: an ordinary one.
  template <typename T> void stream(T* p) const { store(p); }
  static void fence() {}
#define KP_VEC_BINARY(op)                                                      \
  Vec operator op(Vec b) const {                                              \
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = v[i] op b.v[i]; return r;   \
  }
  KP_VEC_BINARY(+) KP_VEC_BINARY(-) KP_VEC_BINARY(*) KP_VEC_BINARY(/)
#undef KP_VEC_BINARY
  static Vec fmadd(Vec a, Vec b, Vec c) {
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i]; return r;
  }
  static Vec fnmadd(Vec a, Vec b, Vec c) {
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = c.v[i] - a.v[i] * b.v[i]; return r;
  }
  static Vec fnmsub(Vec a, Vec b, Vec c) {
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = -(a.v[i] * b.v[i]) - c.v[i]; return r;
  }
  static Vec clamp_magnitude(Vec a, float limit) {
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = std::isnan(a.v[i]) ? a.v[i] : std::min(std::max(a.v[i], -limit), limit); return r;
  }
  static Vec max(Vec a, Vec b) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i]; return r; }
  static Vec min(Vec a, Vec b) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i]; return r; }
  static Vec floor(Vec a) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = std::floor(a.v[i]); return r; }
  static Vec round_nearest(Vec a) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = std::nearbyint(a.v[i]); return r; }
  static Vec ldexp(Vec a, Vec n) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = std::ldexp(a.v[i], int(n.v[i])); return r; }
  static Vec exp2_int(Vec n) { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = std::ldexp(1.f, int(n.v[i])); return r; }
  static Vec zero_where_below(Vec a, float limit, Vec value) {
    Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = a.v[i] < limit ? 0.f : value.v[i]; return r;
  }
  Vec swap_pairs() const { Vec r; for (int i = 0; i < kSize; i += 2) { r.v[i] = v[i + 1]; r.v[i + 1] = v[i]; } return r; }
  Vec reciprocal() const { Vec r; for (int i = 0; i < kSize; ++i) r.v[i] = 1.f / v[i]; return r; }
  float reduce_add() const { float s = 0.f; for (int i = 0; i < kSize; ++i) s += v[i]; return s; }
  float reduce_max() const { float s = v[0]; for (int i = 1; i < kSize; ++i) s = std::max(s, v[i]); return s; }
};

#endif

// exp(x) to about 2 ulp (Cephes' expf polynomial); exactly 0 below the
// smallest normal result, so masked (-inf) scores contribute nothing.
inline Vec vexp(Vec x) {
  const Vec hi = Vec::set1(88.0f), lo = Vec::set1(-88.3762626647949f);
  Vec xc = Vec::min(Vec::max(x, lo), hi);
  Vec fx = Vec::floor(Vec::fmadd(xc, Vec::set1(1.44269504088896341f), Vec::set1(0.5f)));
  xc = xc - fx * Vec::set1(0.693359375f);
  xc = xc - fx * Vec::set1(-2.12194440e-4f);
  Vec z = xc * xc;
  Vec y = Vec::set1(1.9875691500E-4f);
  y = Vec::fmadd(y, xc, Vec::set1(1.3981999507E-3f));
  y = Vec::fmadd(y, xc, Vec::set1(8.3334519073E-3f));
  y = Vec::fmadd(y, xc, Vec::set1(4.1665795894E-2f));
  y = Vec::fmadd(y, xc, Vec::set1(1.6666665459E-1f));
  y = Vec::fmadd(y, xc, Vec::set1(5.0000001201E-1f));
  y = Vec::fmadd(y, z, xc + Vec::set1(1.f));
  return Vec::zero_where_below(x, -87.33654475f, y * Vec::exp2_int(fx));
}

// exp(-x) for silu's 1 + exp(-x), NaN for NaN; arguments beyond |x| = 87.3 are
// clamped there, so the result stays finite and nonzero and 1 / (1 + exp(-x))
// needs no special case. -x = n ln2 + r with |r| <= ln2 / 2, exp(r) by a
// polynomial 1 + r + c2 r^2 + ... (so exp(-0) is exactly 1; coefficients fitted
// for least maximum relative error), scaled by 2^n. Two precisions:
//  * kFloat (float32 outputs): ln2 in two parts (Cody-Waite) and degree 6
//    (relative error 3e-9): about 1 ulp of float, as torch's vectorised exp.
//  * kShort (bfloat16 / float16 outputs): ln2 in one part and degree 5:
//    relative error below 3e-6 for |x| <= 87 and 2e-7 for |x| <= 6, where an
//    output's unit in the last place is 4e-3 (bfloat16) or 5e-4 (float16).
// Either is about half the instructions of vexp, which matters in silu, the
// one kernel here that is compute bound.
enum class ExpPrecision { kFloat, kShort };

template <ExpPrecision P>
inline Vec vexp_neg(Vec x) {
  const Vec xc = Vec::clamp_magnitude(x, 87.33654475f);
  const Vec n = Vec::round_nearest(xc * Vec::set1(-1.44269504088896341f));
  if constexpr (P == ExpPrecision::kFloat) {
    Vec r = Vec::fnmsub(n, Vec::set1(0.693359375f), xc);  // -xc - n * ln2 (high part, exact)
    r = Vec::fnmadd(n, Vec::set1(-2.12194440e-4f), r);    // ... - n * (ln2 - high part)
    Vec p = Vec::set1(1.3814584e-3f);
    p = Vec::fmadd(p, r, Vec::set1(8.368714e-3f));
    p = Vec::fmadd(p, r, Vec::set1(4.166839e-2f));
    p = Vec::fmadd(p, r, Vec::set1(1.6666521e-1f));
    p = Vec::fmadd(p, r, Vec::set1(4.9999994e-1f));
    p = Vec::fmadd(p, r, Vec::set1(1.f));
    p = Vec::fmadd(p, r, Vec::set1(1.f));
    return Vec::ldexp(p, n);
  } else {
    const Vec r = Vec::fnmsub(n, Vec::set1(0.69314718056f), xc);
    Vec p = Vec::set1(8.312581e-3f);
    p = Vec::fmadd(p, r, Vec::set1(4.1890167e-2f));
    p = Vec::fmadd(p, r, Vec::set1(1.6667114e-1f));
    p = Vec::fmadd(p, r, Vec::set1(4.999923e-1f));
    p = Vec::fmadd(p, r, Vec::set1(1.f));
    p = Vec::fmadd(p, r, Vec::set1(1.f));
    return Vec::ldexp(p, n);
  }
}

inline float sexp(float x) { return x < -87.33654475f ? 0.f : std::exp(x); }

}  // namespace kp::cpu::KP_CPU_CAPABILITY
