// kpdrIndexArgs on the CPU: the simulator's gather and scatter entries
// (kpdr.h's core-op section). Gather copies elements (any dtype, bit for
// bit) in parallel; scatter runs serially in index order, so accumulation
// is deterministic (the same sum every run, as ATen's CPU index_put_).
#include <cstring>

#include "kernels/kernels.h"
#include "scalar.h"

namespace kp {
namespace {

int element_size(kpdrDtype dtype) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT32: case KPDR_DTYPE_INT32: return 4;
    case KPDR_DTYPE_FLOAT16: case KPDR_DTYPE_BFLOAT16: return 2;
    case KPDR_DTYPE_BOOL: return 1;
    case KPDR_DTYPE_INT64: return 8;
  }
  return 0;
}

float load_float(const char* p, kpdrDtype dtype) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT16: { Half h; std::memcpy(&h, p, 2); return to_float(h); }
    case KPDR_DTYPE_BFLOAT16: { BF16 b; std::memcpy(&b, p, 2); return to_float(b); }
    default: { float f; std::memcpy(&f, p, 4); return f; }
  }
}

void store_float(char* p, kpdrDtype dtype, float v) {
  switch (dtype) {
    case KPDR_DTYPE_FLOAT16: { const Half h = from_float<Half>(v); std::memcpy(p, &h, 2); return; }
    case KPDR_DTYPE_BFLOAT16: { const BF16 b = from_float<BF16>(v); std::memcpy(p, &b, 2); return; }
    default: std::memcpy(p, &v, 4); return;
  }
}

int64_t load_index(const kpdrIndexOperand& op, int64_t offset) {
  if (op.dtype == KPDR_DTYPE_INT32) return static_cast<const int32_t*>(op.data)[offset];
  return static_cast<const int64_t*>(op.data)[offset];
}

// Walks elements [begin, end) of `sizes` row-major; fn(i, dense offset,
// indexed offset or -1 for a bad index, first index value).
template <typename Fn>
void visit(const kpdrIndexArgs& a, int64_t begin, int64_t end, Fn&& fn) {
  const int nd = a.ndim;
  for (int64_t i = begin; i < end; ++i) {
    int64_t rest = i, dense = 0, indexed = 0;
    int64_t idx_offset[KPDR_MAX_DIMS] = {};
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t at = rest % a.sizes[d];
      rest /= a.sizes[d];
      dense += at * a.dense_strides[d];
      indexed += at * a.indexed_strides[d];
      for (int k = 0; k < a.num_indices; ++k) idx_offset[k] += at * a.indices[k].strides[d];
    }
    bool ok = true;
    int64_t first = 0;
    for (int k = 0; k < a.num_indices; ++k) {
      const kpdrIndexOperand& op = a.indices[k];
      int64_t v = load_index(op, idx_offset[k]);
      if (k == 0) first = v;
      if (k == 0 && a.skip && v == a.skip_value) {  // skipped: its indices are not checked (kpdr.h)
        ok = false;
        break;
      }
      if (v < (a.wrap ? -op.size : 0) || v >= op.size) {
        if (a.error != nullptr) {
          __atomic_store_n(&a.error[1], v, __ATOMIC_RELAXED);
          __atomic_store_n(&a.error[0], static_cast<int64_t>(k + 1), __ATOMIC_RELAXED);
        }
        ok = false;
        break;
      }
      if (v < 0) v += op.size;
      indexed += v * op.stride;
    }
    fn(dense, ok ? indexed : -1, first);
  }
}

int64_t count_of(const kpdrIndexArgs& a) {
  int64_t n = 1;
  for (int d = 0; d < a.ndim; ++d) n *= a.sizes[d];
  return n;
}

}  // namespace

void gather(const kpdrIndexArgs& a) {
  const int size = element_size(a.dtype);
  char* dense = static_cast<char*>(a.dense);
  const char* indexed = static_cast<const char*>(a.indexed);
  parallel_for(0, count_of(a), 4096, [&](int64_t begin, int64_t end) {
    visit(a, begin, end, [&](int64_t d, int64_t x, int64_t) {
      if (x < 0) std::memset(dense + d * size, 0, size);
      else std::memcpy(dense + d * size, indexed + x * size, size);
    });
  });
}

void scatter(const kpdrIndexArgs& a) {
  const int size = element_size(a.dtype);
  const char* dense = static_cast<const char*>(a.dense);
  char* indexed = static_cast<char*>(a.indexed);
  const bool is_float = a.dtype == KPDR_DTYPE_FLOAT32 || a.dtype == KPDR_DTYPE_FLOAT16 || a.dtype == KPDR_DTYPE_BFLOAT16;
  const float alpha = static_cast<float>(a.alpha);
  visit(a, 0, count_of(a), [&](int64_t d, int64_t x, int64_t first) {
    if (x < 0 || (a.skip && first == a.skip_value)) return;
    char* dst = indexed + x * size;
    const char* src = dense + d * size;
    if (is_float && (a.accumulate || alpha != 1.0f)) {
      const float v = alpha * load_float(src, a.dtype);
      store_float(dst, a.dtype, a.accumulate ? load_float(dst, a.dtype) + v : v);
    } else if (a.accumulate) {  // integers (the simulator takes them; alpha an integer)
      const int64_t scale = static_cast<int64_t>(a.alpha);
      if (a.dtype == KPDR_DTYPE_INT64) {
        *reinterpret_cast<int64_t*>(dst) += scale * *reinterpret_cast<const int64_t*>(src);
      } else if (a.dtype == KPDR_DTYPE_INT32) {
        *reinterpret_cast<int32_t*>(dst) += static_cast<int32_t>(scale * *reinterpret_cast<const int32_t*>(src));
      } else {  // bool: logical or of the sum
        *dst = (*dst != 0 || (scale != 0 && *src != 0)) ? 1 : 0;
      }
    } else {
      std::memcpy(dst, src, size);
    }
  });
}

}  // namespace kp
