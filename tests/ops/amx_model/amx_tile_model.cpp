// The amx level's attention code (attention.h with KP_CPU_AMX) run against a
// scalar model of the AMX tile instructions, on any CPU that executes
// AVX-512 and AVX512-BF16: the tile loads, stores and TDPBF16PS below are
// plain C++, so the tiles' layouts (keys as tile A in place, queries and
// values in the VNNI pair layout, o's column order) are checked where AMX
// is absent (tests/ops/test_kernels_amx_model.py builds and runs this). The
// model checks the tile shapes TDPBF16PS requires and aborts on a mismatch.
// Results are compared with the float32 kernels of the same header.
#include <immintrin.h>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
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
#define KP_CPU_AMX 1
#include "kernels/cpu/attention.h"
#include <random>
using namespace kp::cpu::amx;
namespace kp { void parallel_for(int64_t, int64_t, int64_t, const std::function<void(int64_t, int64_t)>&) {} int pool_threads() { return 1; } }
int prefill_check();
int main() {
  if (prefill_check() != 0) return 1;
  double worst = 0;
  for (auto [H, Hkv, T, D, j0, j1] : std::vector<std::array<int64_t, 6>>{{32, 8, 300, 128, 0, 300}, {12, 2, 77, 96, 5, 77}, {3, 1, 65, 32, 0, 65}, {16, 1, 40, 64, 0, 40}, {4, 4, 130, 128, 17, 130}}) {
    std::vector<kp::BF16> q(H * D), k(Hkv * T * D), v(Hkv * T * D);
    std::mt19937 g(1); std::normal_distribution<float> n;
    for (auto* vec : {&q, &k, &v}) for (auto& x : *vec) x = kp::from_float<kp::BF16>(n(g));
    kpdrDecodeAttentionArgs a{};
    a.q = q.data(); a.k = k.data(); a.v = v.data(); a.batch = 1; a.heads = H; a.kv_heads = Hkv; a.head_dim = D;
    a.cache_len = T; a.scale = 0.1f; a.dtype = KPDR_DTYPE_BFLOAT16;
    a.q_stride[0] = H * D; a.q_stride[1] = D; a.k_stride[0] = Hkv * T * D; a.k_stride[1] = T * D; a.k_stride[2] = D;
    a.v_stride[0] = Hkv * T * D; a.v_stride[1] = T * D; a.v_stride[2] = D;
    const int64_t G = H / Hkv;
    AttentionScratch w1, w2; w1.reserve(G, D); w2.reserve(G, D); std::vector<uint32_t> p2; std::vector<kp::BF16> zeros;
    for (int64_t h = 0; h < Hkv; ++h) {
      bf16dp::decode_chunk(a, 0, h, j0, j1, w1, p2, zeros);
      decode_chunk<kp::BF16>(a, 0, h, j0, j1, w2);
      for (int64_t r = 0; r < G; ++r) {
        for (int64_t c = 0; c < D; ++c) {
          double x = w1.o[r * D + c] / w1.l[r], y = w2.o[r * D + c] / w2.l[r];
          worst = std::max(worst, std::abs(x - y));
        }
        if (std::abs(w1.m[r] - w2.m[r]) > 1e-4) std::printf("m differs %f %f\n", w1.m[r], w2.m[r]);
      }
    }
    std::printf("H=%ld Hkv=%ld T=%ld D=%ld [%ld,%ld): max |amx - float| so far %.2e\n", H, Hkv, T, D, j0, j1, worst);
  }
  return worst < 2e-2 ? 0 : 1;
}
// prefill check: amx tasks vs generic prefill_tasks
int prefill_check() {
  double worst = 0;
  for (auto [H, Hkv, T, S, D] : std::vector<std::array<int64_t, 5>>{{4, 2, 100, 100, 64}, {2, 1, 37, 80, 128}, {3, 3, 130, 130, 32}}) {
    std::vector<kp::BF16> q(H * T * D), k(Hkv * S * D), v(Hkv * S * D), o1(H * T * D), o2(H * T * D);
    std::mt19937 g(2); std::normal_distribution<float> n;
    for (auto* vec : {&q, &k, &v}) for (auto& x : *vec) x = kp::from_float<kp::BF16>(n(g));
    kpdrPrefillAttentionArgs a{};
    a.dtype = KPDR_DTYPE_BFLOAT16; a.batch = 1; a.heads = H; a.kv_heads = Hkv; a.seq_q = T; a.seq_kv = S; a.head_dim = D;
    a.q = q.data(); a.q_stride[0] = H * T * D; a.q_stride[1] = T * D; a.q_stride[2] = D;
    a.k = k.data(); a.k_stride[0] = Hkv * S * D; a.k_stride[1] = S * D; a.k_stride[2] = D;
    a.v = v.data(); a.v_stride[0] = Hkv * S * D; a.v_stride[1] = S * D; a.v_stride[2] = D;
    a.out_stride[0] = H * T * D; a.out_stride[1] = T * D; a.out_stride[2] = D;
    a.causal = 1; a.scale = 0.125f;
    const int64_t qb = (T + 63) / 64;
    a.out = o1.data(); bf16dp::tasks(a, 0, H * qb);
    a.out = o2.data(); prefill_tasks<kp::BF16>(a, 0, H * qb);
    for (size_t i = 0; i < o1.size(); ++i) worst = std::max(worst, (double)std::abs(kp::to_float(o1[i]) - kp::to_float(o2[i])));
    std::printf("prefill H=%ld Hkv=%ld T=%ld S=%ld D=%ld: max |amx - float| %.2e\n", H, Hkv, T, S, D, worst);
  }
  return worst < 3e-2 ? 0 : 1;
}

