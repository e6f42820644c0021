// kpdrSortArgs on the CPU: the simulator's sort entry (kpdr.h). Slices run in
// parallel; each is ordered through a permutation of its positions compared
// as (value, position) pairs, a total order, so std::sort and
// std::partial_sort (top-k) give the stable order kpdr.h asks for without a
// stable algorithm's buffer. Values are copied byte for byte from the input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "element_access.h"
#include "kernels/kernels.h"

namespace kp {
namespace {

int element_bytes(kpdrDtype dtype) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: case KPDR_DTYPE_INT32: return 4;
    case KPDR_DTYPE_FLOAT16: case KPDR_DTYPE_BFLOAT16: return 2;
    case KPDR_DTYPE_BOOL: return 1;
    case KPDR_DTYPE_INT64: return 8;
  }
  return 1;
}

int64_t load_integer(const void* base, kpdrDtype dtype, int64_t i) {
  switch (dtype) {
    case KPDR_DTYPE_INT64: return static_cast<const int64_t*>(base)[i];
    case KPDR_DTYPE_INT32: return static_cast<const int32_t*>(base)[i];
    default: return static_cast<const uint8_t*>(base)[i] != 0 ? 1 : 0;  // BOOL
  }
}

// a after b in ascending order: NaN greatest (NaNs equal to each other).
inline bool greater(float a, float b) { return (std::isnan(a) && !std::isnan(b)) || a > b; }
inline bool greater(int64_t a, int64_t b) { return a > b; }

template <typename K, typename Load>
void sort_slices(const kpdrSortArgs& a, Load load) {
  const int dim = a.dim;
  const int64_t n = a.sizes[dim], k = a.k;
  int64_t outer_sizes[KPDR_MAX_DIMS], in_s[KPDR_MAX_DIMS], v_s[KPDR_MAX_DIMS], i_s[KPDR_MAX_DIMS];
  int outer = 0;
  int64_t slices = 1;
  for (int d = 0; d < a.ndim; ++d) {
    if (d == dim) continue;
    outer_sizes[outer] = a.sizes[d];
    in_s[outer] = a.in_strides[d];
    v_s[outer] = a.values != nullptr ? a.values_strides[d] : 0;
    i_s[outer] = a.indices != nullptr ? a.indices_strides[d] : 0;
    slices *= a.sizes[d];
    ++outer;
  }
  const int64_t in_sd = a.in_strides[dim];
  const int64_t v_sd = a.values != nullptr ? a.values_strides[dim] : 0;
  const int64_t i_sd = a.indices != nullptr ? a.indices_strides[dim] : 0;
  const int bytes = element_bytes(a.dtype);
  const bool desc = a.descending != 0;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  parallel_for(0, slices, grain, [&](int64_t begin, int64_t end) {
    std::vector<K> keys(static_cast<size_t>(n));
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t s = begin; s < end; ++s) {
      int64_t rest = s, in_off = 0, v_off = 0, i_off = 0;
      for (int d = outer - 1; d >= 0; --d) {
        const int64_t at = rest % outer_sizes[d];
        rest /= outer_sizes[d];
        in_off += at * in_s[d];
        v_off += at * v_s[d];
        i_off += at * i_s[d];
      }
      for (int64_t j = 0; j < n; ++j) keys[j] = load(a.in, a.dtype, in_off + j * in_sd);
      std::iota(order.begin(), order.end(), int64_t{0});
      const auto before = [&](int64_t x, int64_t y) {
        const K kx = keys[x], ky = keys[y];
        if (greater(kx, ky)) return desc;
        if (greater(ky, kx)) return !desc;
        return x < y;  // equal: input order (stable)
      };
      if (k < n && k <= n / 4) {
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      } else {
        std::sort(order.begin(), order.end(), before);
      }
      for (int64_t j = 0; j < k; ++j) {
        const int64_t from = order[j];
        if (a.values != nullptr) {
          std::memcpy(static_cast<char*>(a.values) + (v_off + j * v_sd) * bytes,
                      static_cast<const char*>(a.in) + (in_off + from * in_sd) * bytes, static_cast<size_t>(bytes));
        }
        if (a.indices != nullptr) a.indices[i_off + j * i_sd] = from;
      }
    }
  });
}

}  // namespace

void sort(const kpdrSortArgs& a) {
  if (a.k == 0 || (a.values == nullptr && a.indices == nullptr)) return;
  for (int d = 0; d < a.ndim; ++d) {
    if (d != a.dim && a.sizes[d] == 0) return;  // no slice
  }
  switch (a.dtype) {
    case KPDR_DTYPE_FLOAT32: case KPDR_DTYPE_FLOAT16: case KPDR_DTYPE_BFLOAT16:
      sort_slices<float>(a, [](const void* p, kpdrDtype t, int64_t i) { return load(p, t, i); });
      return;
    default:
      sort_slices<int64_t>(a, [](const void* p, kpdrDtype t, int64_t i) { return load_integer(p, t, i); });
      return;
  }
}

}  // namespace kp
