// kpdrGemmArgs on the CPU: the simulator's GEMM (kpdr.h's core-op section).
// Correctness first: op(B) of each batch is widened once to a row-major float
// panel, then every row of C accumulates k rank-1 updates of that panel (a
// contiguous inner loop the compiler vectorises), rows spread over threads.
// ISA independent: the host-addressable simulator path keeps ATen's BLAS.
#include <algorithm>
#include <vector>

#include "kernels/kernels.h"
#include "scalar.h"

namespace kp {
namespace {

template <typename T>
float load(const void* base, int64_t i) {
  return to_float(static_cast<const T*>(base)[i]);
}

template <typename T>
void gemm_typed(const kpdrGemmArgs& a) {
  std::vector<float> panel(static_cast<size_t>(a.k * a.n));
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t a0 = b * a.a_batch_stride, b0 = b * a.b_batch_stride;
    T* c = static_cast<T*>(a.c) + b * a.c_batch_stride;
    for (int64_t p = 0; p < a.k; ++p) {
      for (int64_t j = 0; j < a.n; ++j) {
        panel[p * a.n + j] = load<T>(a.b, b0 + (a.trans_b ? j * a.b_ld + p : p * a.b_ld + j));
      }
    }
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, a.k * a.n));
    parallel_for(0, a.m, grain, [&](int64_t r0, int64_t r1) {
      std::vector<float> acc(static_cast<size_t>(a.n));
      for (int64_t i = r0; i < r1; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t p = 0; p < a.k; ++p) {
          const float x = load<T>(a.a, a0 + (a.trans_a ? p * a.a_ld + i : i * a.a_ld + p));
          const float* row = panel.data() + p * a.n;
          for (int64_t j = 0; j < a.n; ++j) acc[j] += x * row[j];
        }
        T* out = c + i * a.c_ld;
        for (int64_t j = 0; j < a.n; ++j) {
          // beta == 0 never reads C (BLAS semantics: NaN in C does not leak).
          const float prior = a.beta == 0.0f ? 0.0f : a.beta * to_float(out[j]);
          out[j] = from_float<T>(a.alpha * acc[j] + prior);
        }
      }
    });
  }
}

}  // namespace

void gemm(const kpdrGemmArgs& args) {
  switch (args.dtype) {
    case KPDR_DTYPE_FLOAT32: return gemm_typed<float>(args);
    case KPDR_DTYPE_FLOAT16: return gemm_typed<Half>(args);
    case KPDR_DTYPE_BFLOAT16: return gemm_typed<BF16>(args);
  }
}

}  // namespace kp
