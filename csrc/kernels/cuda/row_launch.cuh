// Launch configurations of the row kernels (rms_norm, softmax): a group of
// `threads` per row (`split` rows per block), each thread keeping at most
// kRowMaxVpt vectors of its row in registers. The tuner times the candidates.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

namespace kp::cuda {

constexpr int kRowMaxVpt = 8;

// The smallest power of two >= v within [lo, hi].
inline int round_up_pow2(int64_t v, int lo, int hi) {
  int p = lo;
  while (p < hi && p < v) p <<= 1;
  return p;
}

// Rows of `nvec` vectors: about 4 vectors per thread, 256 threads per block.
inline LaunchConfig row_default_config(int64_t nvec) {
  const int g = round_up_pow2(ceil_div(nvec, 4), 32, 1024);
  return LaunchConfig{g, std::max(1, 256 / g)};
}

inline ConfigList row_candidates(int64_t nvec) {
  ConfigList list;
  const LaunchConfig d = row_default_config(nvec);
  list.add(d.threads, d.split);
  for (int g = 32; g <= 1024; g <<= 1) {
    if (ceil_div(nvec, g) > kRowMaxVpt || (g > 32 && g / 2 >= nvec)) continue;
    for (int rpb : {std::max(1, 256 / g), std::max(1, 512 / g), 1}) {
      if (g * rpb > 1024 || (g == d.threads && rpb == d.split)) continue;
      bool seen = false;
      for (int i = 0; i < list.size; ++i) seen |= list.items[i].threads == g && list.items[i].split == rpb;
      if (!seen) list.add(g, rpb);
    }
  }
  return list;
}

}  // namespace kp::cuda
