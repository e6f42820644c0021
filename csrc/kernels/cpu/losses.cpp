// The simulator's softmax_dim, nll_loss and layer_norm entries and the
// reduce entry's statistics (argmax/argmin, var/std) on the CPU (kpdr.h's
// core-op section). Correctness first, like pointwise.cpp: every operand is
// read through its own dtype and strides, sums run in double, and the
// independent rows are spread over threads. Only the host_addressable=0
// simulator runs these; the host-addressable one keeps ATen's CPU kernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "element_access.h"
#include "scalar.h"

namespace kp {
namespace {

int64_t load_index(const void* base, kpdrDtype dtype, int64_t i) {
  switch (dtype) {
    case KPDR_DTYPE_INT32: return static_cast<const int32_t*>(base)[i];
    case KPDR_DTYPE_BOOL: return static_cast<const uint8_t*>(base)[i] != 0;
    default: return static_cast<const int64_t*>(base)[i];
  }
}

// The dimensions other than the reduced ones, as an index space: offset(i)
// of every operand for the outer index i (row-major).
struct Outer {
  int count = 0;
  int64_t sizes[KPDR_MAX_DIMS];
  int64_t strides[3][KPDR_MAX_DIMS];
  void offsets(int64_t index, int64_t* out, int operands) const {
    for (int k = 0; k < operands; ++k) out[k] = 0;
    for (int d = count - 1; d >= 0; --d) {
      const int64_t i = index % sizes[d];
      index /= sizes[d];
      for (int k = 0; k < operands; ++k) out[k] += i * strides[k][d];
    }
  }
};

void softmax_rows(const kpdrSoftmaxDimArgs& a) {
  Outer outer;
  int64_t rows = 1;
  for (int d = 0; d < a.ndim; ++d) {
    if (d == a.dim) continue;
    outer.sizes[outer.count] = a.sizes[d];
    outer.strides[0][outer.count] = a.out_strides[d];
    outer.strides[1][outer.count] = a.x.strides[d];
    outer.strides[2][outer.count] = a.grad.strides[d];
    ++outer.count;
    rows *= a.sizes[d];
  }
  const int64_t n = a.sizes[a.dim], so = a.out_strides[a.dim], sx = a.x.strides[a.dim], sg = a.grad.strides[a.dim];
  const bool backward = a.op == KPDR_SOFTMAX_BACKWARD || a.op == KPDR_LOG_SOFTMAX_BACKWARD;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t base[3];
      outer.offsets(r, base, backward ? 3 : 2);
      auto x = [&](int64_t j) { return load(a.x.data, a.x.dtype, base[1] + j * sx); };
      auto put = [&](int64_t j, float v) { store(a.out, a.out_dtype, base[0] + j * so, v); };
      if (!backward) {
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n; ++j) max = std::isnan(x(j)) || x(j) > max ? x(j) : max;
        double sum = 0.0;
        for (int64_t j = 0; j < n; ++j) sum += std::exp(x(j) - max);
        const float log_sum = static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < n; ++j) {
          put(j, a.op == KPDR_LOG_SOFTMAX ? x(j) - max - log_sum : static_cast<float>(std::exp(x(j) - max) / sum));
        }
        continue;
      }
      auto g = [&](int64_t j) { return load(a.grad.data, a.grad.dtype, base[2] + j * sg); };
      double dot = 0.0;
      for (int64_t j = 0; j < n; ++j) dot += a.op == KPDR_SOFTMAX_BACKWARD ? double(g(j)) * x(j) : g(j);
      const float s = static_cast<float>(dot);
      for (int64_t j = 0; j < n; ++j) {
        put(j, a.op == KPDR_SOFTMAX_BACKWARD ? x(j) * (g(j) - s) : g(j) - std::exp(x(j)) * s);
      }
    }
  });
}

}  // namespace

void softmax_dim(const kpdrSoftmaxDimArgs& a) { softmax_rows(a); }

void nll_loss(const kpdrNllLossArgs& a) {
  const int64_t elements = a.batch * a.spatial, C = a.classes;
  auto target_of = [&](int64_t n, int64_t s) {
    return load_index(a.target, a.target_dtype, n * a.target_strides[0] + s * a.target_strides[1]);
  };
  auto weight_of = [&](int64_t t) { return a.weight ? load(a.weight, a.dtype, t * a.weight_stride) : 1.0f; };
  auto valid = [&](int64_t t) { return t >= 0 && t < C; };
  if (!a.backward) {
    double loss_sum = 0.0, weight_sum = 0.0;
    for (int64_t e = 0; e < elements; ++e) {
      const int64_t n = e / a.spatial, s = e % a.spatial, t = target_of(n, s);
      float loss = 0.0f;
      if (t != a.ignore_index) {
        if (valid(t)) {
          const float w = weight_of(t);
          loss = -w * load(a.input, a.dtype, n * a.input_strides[0] + t * a.input_strides[1] + s * a.input_strides[2]);
          weight_sum += w;
        } else {
          loss = NAN;
        }
      }
      if (a.reduction == 0) store(a.out, a.dtype, n * a.out_strides[0] + s * a.out_strides[1], loss);
      else loss_sum += loss;
    }
    if (a.reduction == 1) store(a.out, a.dtype, 0, static_cast<float>(loss_sum / weight_sum));
    if (a.reduction == 2) store(a.out, a.dtype, 0, static_cast<float>(loss_sum));
    store(a.total_weight, a.dtype, 0, a.reduction == 0 ? 0.0f : static_cast<float>(weight_sum));
    return;
  }
  if (elements == 0 || C == 0) return;
  const float scale = a.reduction == 1 ? 1.0f / load(a.total_weight, a.dtype, 0) : 1.0f;
  parallel_for(0, elements, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, C)), [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      const int64_t n = e / a.spatial, s = e % a.spatial, t = target_of(n, s);
      const int64_t row = n * a.grad_input_strides[0] + s * a.grad_input_strides[2];
      for (int64_t c = 0; c < C; ++c) store(a.grad_input, a.dtype, row + c * a.grad_input_strides[1], 0.0f);
      if (t == a.ignore_index || !valid(t)) continue;
      const float g = a.reduction == 0 ? load(a.grad_output, a.dtype, n * a.out_strides[0] + s * a.out_strides[1])
                                       : load(a.grad_output, a.dtype, 0) * scale;
      store(a.grad_input, a.dtype, row + t * a.grad_input_strides[1], -weight_of(t) * g);
    }
  });
}

void layer_norm(const kpdrLayerNormArgs& a) {
  const int64_t R = a.rows, N = a.cols;
  auto w = [&](int64_t i) { return a.weight ? load(a.weight, a.weight_dtype, i) : 1.0f; };
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N));
  if (!a.backward) {
    parallel_for(0, R, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t xr = r * a.x_row_stride;
        double sum = 0.0;
        for (int64_t i = 0; i < N; ++i) sum += load(a.x, a.dtype, xr + i);
        const float mean = N > 0 ? static_cast<float>(sum / N) : NAN;
        double sq = 0.0;
        for (int64_t i = 0; i < N; ++i) {
          const double d = load(a.x, a.dtype, xr + i) - mean;
          sq += d * d;
        }
        const float rstd = 1.0f / std::sqrt(static_cast<float>(N > 0 ? sq / N : NAN) + a.eps);
        for (int64_t i = 0; i < N; ++i) {
          const float b = a.bias ? load(a.bias, a.weight_dtype, i) : 0.0f;
          store(a.out, a.dtype, r * a.out_row_stride + i, (load(a.x, a.dtype, xr + i) - mean) * rstd * w(i) + b);
        }
        if (a.mean) store(a.mean, a.stats_dtype, r, mean);
        if (a.rstd) store(a.rstd, a.stats_dtype, r, rstd);
      }
    });
    return;
  }
  auto xhat = [&](int64_t r, int64_t i) {
    return (load(a.x, a.dtype, r * a.x_row_stride + i) - load(a.mean, a.stats_dtype, r)) * load(a.rstd, a.stats_dtype, r);
  };
  auto g = [&](int64_t r, int64_t i) { return load(a.grad_out, a.dtype, r * a.grad_out_row_stride + i); };
  if (a.grad_input) {
    parallel_for(0, R, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        double sum_gw = 0.0, sum_gw_xhat = 0.0;
        for (int64_t i = 0; i < N; ++i) {
          const float gw = g(r, i) * w(i);
          sum_gw += gw;
          sum_gw_xhat += double(gw) * xhat(r, i);
        }
        const float mean_gw = static_cast<float>(sum_gw / N), mean_gw_xhat = static_cast<float>(sum_gw_xhat / N);
        const float rstd = load(a.rstd, a.stats_dtype, r);
        for (int64_t i = 0; i < N; ++i) {
          store(a.grad_input, a.dtype, r * a.grad_input_row_stride + i,
                rstd * (g(r, i) * w(i) - mean_gw - xhat(r, i) * mean_gw_xhat));
        }
      }
    });
  }
  if (a.grad_weight || a.grad_bias) {
    parallel_for(0, N, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, R)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        double gw = 0.0, gb = 0.0;
        for (int64_t r = 0; r < R; ++r) {
          gb += g(r, i);
          if (a.grad_weight) gw += double(g(r, i)) * xhat(r, i);
        }
        if (a.grad_weight) store(a.grad_weight, a.weight_dtype, i, static_cast<float>(gw));
        if (a.grad_bias) store(a.grad_bias, a.weight_dtype, i, static_cast<float>(gb));
      }
    });
  }
}

void reduce_statistics(const kpdrReduceArgs& a) {
  Outer kept, reduced;
  for (int d = 0; d < a.ndim; ++d) {
    Outer& o = (a.reduce_mask & (1u << d)) ? reduced : kept;
    o.sizes[o.count] = a.sizes[d];
    o.strides[0][o.count] = a.in_strides[d];
    o.strides[1][o.count] = a.out_strides[d];
    ++o.count;
  }
  int64_t outputs = 1, count = 1;
  for (int d = 0; d < kept.count; ++d) outputs *= kept.sizes[d];
  for (int d = 0; d < reduced.count; ++d) count *= reduced.sizes[d];
  const bool arg = a.op == KPDR_REDUCE_ARGMAX || a.op == KPDR_REDUCE_ARGMIN;
  parallel_for(0, outputs, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, count)), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> offsets(static_cast<size_t>(count));
    for (int64_t j = 0; j < count; ++j) {
      int64_t o[1];
      reduced.offsets(j, o, 1);
      offsets[j] = o[0];
    }
    for (int64_t k = begin; k < end; ++k) {
      int64_t base[2];
      kept.offsets(k, base, 2);
      auto x = [&](int64_t j) { return load(a.in, a.in_dtype, base[0] + offsets[j]); };
      if (a.out_dtype == KPDR_DTYPE_INT64 && !arg) {  // SUM, AMAX or AMIN of bool or integers, exact
        int64_t acc = a.op == KPDR_REDUCE_AMAX ? std::numeric_limits<int64_t>::min()
                      : a.op == KPDR_REDUCE_AMIN ? std::numeric_limits<int64_t>::max() : 0;
        for (int64_t j = 0; j < count; ++j) {
          const int64_t v = load_index(a.in, a.in_dtype, base[0] + offsets[j]);
          if (a.op == KPDR_REDUCE_AMAX) acc = std::max(acc, v);
          else if (a.op == KPDR_REDUCE_AMIN) acc = std::min(acc, v);
          else acc += v;
        }
        static_cast<int64_t*>(a.out)[base[1]] = acc;
        continue;
      }
      if (arg) {
        int64_t best = 0;
        float best_value = count > 0 ? x(0) : 0.0f;
        for (int64_t j = 1; j < count && !std::isnan(best_value); ++j) {
          const float v = x(j);
          if (std::isnan(v) || (a.op == KPDR_REDUCE_ARGMAX ? v > best_value : v < best_value)) {
            best = j;
            best_value = v;
          }
        }
        static_cast<int64_t*>(a.out)[base[1]] = best;
        continue;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < count; ++j) sum += x(j);
      const double mean = sum / static_cast<double>(count);
      double sq = 0.0;
      for (int64_t j = 0; j < count; ++j) sq += (x(j) - mean) * (x(j) - mean);
      const double var = sq / std::max(0.0, static_cast<double>(count) - a.correction);
      store(a.out, a.out_dtype, base[1], static_cast<float>(a.op == KPDR_REDUCE_STD ? std::sqrt(var) : var));
    }
  });
}

}  // namespace kp
