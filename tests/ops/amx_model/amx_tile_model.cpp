// The amx and avx512_bf16 levels' bfloat16 attention code (attention.h with
// KP_CPU_AMX, or without it when KP_MODEL_NO_AMX is defined) run against a
// scalar model of the AMX tile instructions and a model of the AVX512-BF16
// ones (vdpbf16ps, vcvtne2ps2bf16, vcvtneps2bf16) written with AVX-512F, so
// it runs on any CPU that executes AVX-512 (tests/ops/test_kernels_amx_model.py
// builds and runs this): the tiles' layouts (keys as tile A in place, queries
// and values in the VNNI pair layout, o's column order) are checked where the
// instructions are absent. The models are fakes of hardware we cannot have
// here; on the GPU machine's Xeon the kernel tests run the real instructions.
// The tile model checks the shapes TDPBF16PS requires and aborts on a
// mismatch. Results are compared with the float32 kernels of the same header.
#include <immintrin.h>
#include <array>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

namespace bf16_model {
inline __m512 low(__m512i x) { return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)); }
inline __m512 high(__m512i x) { return _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(int(0xFFFF0000u)))); }
inline __m512 dpbf16_ps(__m512 acc, __m512bh a, __m512bh b) {
  const __m512i x = (__m512i)a, y = (__m512i)b;
  return _mm512_fmadd_ps(high(x), high(y), _mm512_fmadd_ps(low(x), low(y), acc));
}
inline __m256i round16(__m512 v) {  // round to nearest even (inputs here are finite)
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16));
}
inline __m512bh cvtne2ps_pbh(__m512 a, __m512 b) {
  return (__m512bh)_mm512_inserti64x4(_mm512_castsi256_si512(round16(b)), round16(a), 1);
}
inline __m256bh cvtneps_pbh(__m512 a) { return (__m256bh)round16(a); }
}  // namespace bf16_model
#define _mm512_dpbf16_ps bf16_model::dpbf16_ps
#define _mm512_cvtne2ps_pbh bf16_model::cvtne2ps_pbh
#define _mm512_cvtneps_pbh bf16_model::cvtneps_pbh

namespace emu {
struct Cfg { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; };
static Cfg cfg; static uint8_t tiles[8][16][64];
inline float bf(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline void loadconfig(const void* c) { std::memcpy(&cfg, c, sizeof cfg); }
inline void loadd(int t, const void* base, long stride) { for (int r = 0; r < cfg.rows[t]; ++r) std::memcpy(tiles[t][r], (const char*)base + r * stride, cfg.colsb[t]); }
inline void stored(int t, void* base, long stride) { for (int r = 0; r < cfg.rows[t]; ++r) std::memcpy((char*)base + r * stride, tiles[t][r], cfg.colsb[t]); }
inline void zero(int t) { std::memset(tiles[t], 0, sizeof tiles[t]); }
inline void dp(int c, int a, int b) {
  if (cfg.colsb[a] / 4 != cfg.rows[b] || cfg.rows[c] != cfg.rows[a] || cfg.colsb[c] != cfg.colsb[b]) { std::printf("BAD TILE SHAPES\n"); std::abort(); }
  for (int m = 0; m < cfg.rows[a]; ++m) for (int n = 0; n < cfg.colsb[c] / 4; ++n) {
    float acc; std::memcpy(&acc, &tiles[c][m][4 * n], 4);
    for (int k = 0; k < cfg.colsb[a] / 4; ++k) {
      uint16_t a0, a1, b0, b1;
      std::memcpy(&a0, &tiles[a][m][4 * k], 2); std::memcpy(&a1, &tiles[a][m][4 * k + 2], 2);
      std::memcpy(&b0, &tiles[b][k][4 * n], 2); std::memcpy(&b1, &tiles[b][k][4 * n + 2], 2);
      acc += bf(a0) * bf(b0) + bf(a1) * bf(b1);
    }
    std::memcpy(&tiles[c][m][4 * n], &acc, 4);
  }
}
}
#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#undef _tile_release
#define _tile_loadconfig emu::loadconfig
#define _tile_loadd(t, b, s) emu::loadd(t, b, s)
#define _tile_stored(t, b, s) emu::stored(t, b, s)
#define _tile_zero(t) emu::zero(t)
#define _tile_dpbf16ps(c, a, b) emu::dp(c, a, b)
#define _tile_release() ((void)0)
#define KP_CPU_CAPABILITY amx
#define KP_VEC_AVX512 1
#define KP_VEC_AVX512_BF16 1
#ifndef KP_MODEL_NO_AMX
#define KP_CPU_AMX 1
#endif
#include "kernels/cpu/attention.h"
using namespace kp::cpu::amx;
// One thread: the pieces run in order on the caller.
namespace kp {
void parallel_for(int64_t b, int64_t e, int64_t, const std::function<void(int64_t, int64_t)>& fn) { if (b < e) fn(b, e); }
int pool_threads() { return 1; }
}

int decode_check() {
  double worst = 0;
  for (auto [H, Hkv, T, D, j0, j1] : std::vector<std::array<int64_t, 6>>{
           {32, 8, 300, 128, 0, 300}, {12, 2, 77, 96, 5, 77}, {3, 1, 65, 32, 0, 65}, {16, 1, 40, 64, 0, 40},
           {4, 4, 130, 128, 17, 130}, {40, 8, 200, 128, 33, 199}, {64, 4, 100, 64, 0, 100}, {8, 1, 97, 256, 1, 97}}) {
    std::vector<kp::BF16> q(H * D), k(Hkv * T * D), v(Hkv * T * D);
    std::mt19937 g(1); std::normal_distribution<float> n;
    for (auto* vec : {&q, &k, &v}) for (auto& x : *vec) x = kp::from_float<kp::BF16>(n(g));
    kpdrDecodeAttentionArgs a{};
    a.q = q.data(); a.k = k.data(); a.v = v.data(); a.batch = 1; a.heads = H; a.kv_heads = Hkv; a.head_dim = D;
    a.cache_len = T; a.scale = 0.1f; a.dtype = KPDR_DTYPE_BFLOAT16;
    a.q_stride[0] = H * D; a.q_stride[1] = D; a.k_stride[0] = Hkv * T * D; a.k_stride[1] = T * D; a.k_stride[2] = D;
    a.v_stride[0] = Hkv * T * D; a.v_stride[1] = T * D; a.v_stride[2] = D;
    const int64_t G = H / Hkv;
    using bf16_decode::QkPath;
    AttentionScratch w2; w2.reserve(G, D);
    for (int64_t h = 0; h < Hkv; ++h) {
      decode_chunk<kp::BF16>(a, 0, h, j0, j1, w2);
      // Every q.k path this level has: tiles (where usable), vdpbf16ps, widened FMAs.
      for (int path = 0; path < 3; ++path) {
        bf16_decode::DecodeScratch w1;
        if (path == 0) {
#if defined(KP_CPU_AMX)
          if (!bf16_decode::amx_decode::usable(G, D)) continue;
          bf16_decode::decode_chunk<QkPath::kTiles>(a, 0, h, j0, j1, w1);
#else
          continue;
#endif
        } else if (path == 1) {
          bf16_decode::decode_chunk<QkPath::kDotBf16>(a, 0, h, j0, j1, w1);
        } else {
          bf16_decode::decode_chunk<QkPath::kWidenFma>(a, 0, h, j0, j1, w1);
        }
        for (int64_t r = 0; r < G; ++r) {
          for (int64_t c = 0; c < D; ++c) {
            double x = w1.o[r * D + c] / w1.l[r], y = w2.o[r * D + c] / w2.l[r];
            worst = std::max(worst, std::abs(x - y));
          }
          if (std::abs(w1.m[r] - w2.m[r]) > 1e-4) { std::printf("path %d: m differs %f %f\n", path, w1.m[r], w2.m[r]); return 1; }
        }
      }
    }
    std::printf("decode H=%ld Hkv=%ld T=%ld D=%ld [%ld,%ld): max |bf16 path - float| so far %.2e\n", H, Hkv, T, D, j0, j1, worst);
  }
  return worst < 2e-2 ? 0 : 1;
}

// prefill_attention's bfloat16 path against the generic prefill_tasks.
int prefill_check() {
  double worst = 0;
  for (auto [B, H, Hkv, T, S, D, causal, wide] : std::vector<std::array<int64_t, 8>>{
           {1, 4, 2, 100, 100, 64, 1, 0}, {1, 2, 1, 37, 80, 128, 1, 0}, {2, 3, 3, 130, 130, 32, 1, 1},
           {1, 4, 1, 70, 150, 128, 0, 0}, {1, 8, 2, 200, 64, 96, 1, 1}, {1, 2, 2, 80, 40, 64, 1, 0},
           // Several softmax spans of 256 keys, the last one partly outside the keys.
           {1, 2, 1, 300, 600, 64, 1, 1}, {1, 2, 2, 530, 530, 128, 1, 0}, {1, 2, 1, 90, 700, 32, 0, 0}}) {
    std::vector<kp::BF16> q(B * H * T * D), k(B * Hkv * S * D), v(B * Hkv * S * D), o1(B * H * T * D), o2(B * H * T * D);
    std::mt19937 g(2); std::normal_distribution<float> n;
    for (auto* vec : {&q, &k, &v}) for (auto& x : *vec) x = kp::from_float<kp::BF16>(n(g));
    kpdrPrefillAttentionArgs a{};
    a.dtype = KPDR_DTYPE_BFLOAT16; a.batch = B; a.heads = H; a.kv_heads = Hkv; a.seq_q = T; a.seq_kv = S; a.head_dim = D;
    a.q = q.data(); a.q_stride[0] = H * T * D; a.q_stride[1] = T * D; a.q_stride[2] = D;
    a.k = k.data(); a.k_stride[0] = Hkv * S * D; a.k_stride[1] = S * D; a.k_stride[2] = D;
    a.v = v.data(); a.v_stride[0] = Hkv * S * D; a.v_stride[1] = S * D; a.v_stride[2] = D;
    a.out_stride[0] = H * T * D; a.out_stride[1] = T * D; a.out_stride[2] = D;
    a.causal = causal;
    // Wide scores (scale 1): a row's max keeps rising, so the lazy rescale runs.
    a.scale = wide ? 1.f : 0.125f;
    a.out = o1.data(); prefill_attention(a);
    a.out = o2.data(); prefill_tasks<kp::BF16>(a, 0, B * H * ((T + 63) / 64));
    for (size_t i = 0; i < o1.size(); ++i) worst = std::max(worst, (double)std::abs(kp::to_float(o1[i]) - kp::to_float(o2[i])));
    std::printf("prefill B=%ld H=%ld Hkv=%ld T=%ld S=%ld D=%ld causal=%ld: max |bf16 path - float| %.2e\n", B, H, Hkv, T, S, D, causal, worst);
  }
  return worst < 3e-2 ? 0 : 1;
}

int main() {
  if (prefill_check() != 0) return 1;
  return decode_check();
}
