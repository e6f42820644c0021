// Storage types of the kernels and their scalar conversions to and from
// float (the accumulation type). ISA independent.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kp {

struct BF16 { uint16_t bits; };
struct Half { uint16_t bits; };

inline float to_float(float v) { return v; }

inline float to_float(BF16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float to_float(Half h) {
  // IEEE binary16 -> binary32, subnormals included (the c10::Half method).
  const uint32_t w = uint32_t(h.bits) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  uint32_t u = (two_w >> 4) + exp_offset;
  float normalized;
  std::memcpy(&normalized, &u, 4);
  normalized *= 0x1.0p-112f;
  const uint32_t magic_mask = 126u << 23;
  u = (two_w >> 17) | magic_mask;
  float denormalized;
  std::memcpy(&denormalized, &u, 4);
  denormalized -= 0.5f;
  const uint32_t denormalized_cutoff = 1u << 27;
  float out = two_w < denormalized_cutoff ? denormalized : normalized;
  uint32_t bits;
  std::memcpy(&bits, &out, 4);
  bits |= sign;
  std::memcpy(&out, &bits, 4);
  return out;
}

template <typename T> T from_float(float f);

template <> inline float from_float<float>(float f) { return f; }

template <> inline BF16 from_float<BF16>(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return BF16{0x7FC0};
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return BF16{uint16_t(u >> 16)};
}

template <> inline Half from_float<Half>(float f) {
  // binary32 -> binary16, round to nearest even (the c10::Half method).
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  uint32_t w;
  std::memcpy(&w, &f, 4);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  uint32_t bias_bits = (bias >> 1) + 0x07800000u;
  float bias_f;
  std::memcpy(&bias_f, &bias_bits, 4);
  base = bias_f + base;
  uint32_t bits;
  std::memcpy(&bits, &base, 4);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return Half{uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign))};
}

}  // namespace kp
