// kpdrRandomArgs on the CPU: the simulator's random entry (kpdr.h). Philox4x32-10
// is counter-based, so every element draws independently of the others and
// of the thread that computes it: the fill runs in parallel and gives the same
// values for any thread count (and, up to float rounding of log/cos/sqrt, the
// same values as any other runtime's).
#include <cmath>
#include <cstdint>

#include "element_access.h"
#include "kernels/kernels.h"

namespace kp {
namespace {

struct Words {
  uint32_t r[4];
};

// Philox4x32-10 with Random123's constants: 10 rounds, the key bumped between them.
Words philox(uint64_t counter, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  return {{c0, c1, c2, c3}};
}

constexpr float kTwoPow24 = 1.0f / 16777216.0f;

void store_integer(void* out, kpdrDtype dtype, int64_t at, int64_t v) {
  switch (dtype) {
    case KPDR_DTYPE_INT64: static_cast<int64_t*>(out)[at] = v; return;
    case KPDR_DTYPE_INT32: static_cast<int32_t*>(out)[at] = static_cast<int32_t>(v); return;
    case KPDR_DTYPE_BOOL: static_cast<uint8_t*>(out)[at] = v != 0 ? 1 : 0; return;
    default: store(out, dtype, at, static_cast<float>(v)); return;
  }
}

}  // namespace

void random_fill(const kpdrRandomArgs& a) {
  int64_t n = 1;
  for (int d = 0; d < a.ndim; ++d) n *= a.sizes[d];
  const float fa = static_cast<float>(a.a), fb = static_cast<float>(a.b);
  const uint64_t range = static_cast<uint64_t>(a.high) - static_cast<uint64_t>(a.low);
  parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t rest = i, at = 0;
      for (int d = a.ndim - 1; d >= 0; --d) {
        at += (rest % a.sizes[d]) * a.out_strides[d];
        rest /= a.sizes[d];
      }
      const Words w = philox(static_cast<uint64_t>(i), a.seed);
      const float u = static_cast<float>(w.r[0] >> 8) * kTwoPow24;
      const float u1 = static_cast<float>((w.r[0] >> 8) + 1) * kTwoPow24;
      switch (a.distribution) {
        case KPDR_RANDOM_UNIFORM: store(a.out, a.dtype, at, fa + (fb - fa) * u); break;
        case KPDR_RANDOM_NORMAL: {
          const float u2 = static_cast<float>(w.r[1] >> 8) * kTwoPow24;
          const float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530717958647692f * u2);
          store(a.out, a.dtype, at, fa + fb * z);
          break;
        }
        case KPDR_RANDOM_BERNOULLI: store_integer(a.out, a.dtype, at, u < fa ? 1 : 0); break;
        case KPDR_RANDOM_EXPONENTIAL: store(a.out, a.dtype, at, -std::log(u1) / fa); break;
        case KPDR_RANDOM_INTEGER: {
          const uint64_t bits = static_cast<uint64_t>(w.r[0]) | (static_cast<uint64_t>(w.r[1]) << 32);
          store_integer(a.out, a.dtype, at, static_cast<int64_t>(static_cast<uint64_t>(a.low) + bits % range));
          break;
        }
        default: break;
      }
    }
  });
}

}  // namespace kp
