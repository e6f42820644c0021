// avg_pool2d (and adaptive average pooling with even windows) and
// upsample_nearest2d, with their backward ops, composed from
// the runtime's entries when device memory is not host addressable:
//
// - avg_pool2d is the mean of each window's columns (aten::im2col through
//   the im2col entry, then a reduce MEAN); its backward spreads grad / taps
//   back over the windows (aten::col2im, the same entry's other direction),
//   in float32 for 16-bit dtypes so overlapping windows sum with one rounding
//   as ATen's CPU kernel does. Only ATen's default divisor is taken (every
//   window counts kh * kw: count_include_pad, or no padding; no ceil_mode
//   window that would hang over the edge; no divisor_override).
// - upsample_nearest2d is advanced indexing with the source row and column of
//   each output position (ATen's nearest_idx, computed on the host and
//   uploaded: oh + ow integers), so the gather entry serves it; its backward
//   an index_put_ with accumulation (the scatter entry).
//
// Everything else runs through the counted CPU fallback, which also raises
// ATen's errors.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>
#include <optional>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;
using Ints = at::IntArrayRef;

bool device_float(T t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && t.layout() == at::kStrided &&
         entry_float(t.scalar_type()) && !t.is_neg() && !t.is_conj();
}

// The d-th of a 2-d parameter given as one value or two; `fallback` when empty.
std::optional<int64_t> param(Ints v, size_t d, std::optional<int64_t> fallback = std::nullopt) {
  if (v.empty()) return fallback;
  if (v.size() == 1) return v[0];
  if (v.size() == 2) return v[d];
  return std::nullopt;
}

struct Pool {
  int64_t k[2], s[2], p[2], out[2];
};

// The pooling a call describes, if every window counts kh * kw elements.
std::optional<Pool> pool_of(T self, Ints kernel, Ints stride, Ints padding, bool ceil_mode, bool count_include_pad,
                            std::optional<int64_t> divisor_override) {
  if (!device_float(self) || (self.dim() != 3 && self.dim() != 4) || divisor_override.has_value()) return std::nullopt;
  Pool pool{};
  for (size_t d = 0; d < 2; ++d) {
    const auto k = param(kernel, d), p = param(padding, d, 0);
    if (!k) return std::nullopt;
    const auto s = param(stride, d, *k);
    if (!s || !p || *k < 1 || *s < 1 || *p < 0 || *p > *k / 2) return std::nullopt;
    if (*p > 0 && !count_include_pad) return std::nullopt;
    const int64_t in = self.size(self.dim() - 2 + d);
    const int64_t span = in + 2 * *p - *k;
    if (span < 0) return std::nullopt;
    const int64_t floor_out = span / *s + 1;
    // ceil_mode's extra last window (ATen's pooling_output_shape) would count fewer
    // elements: keep ATen's own kernel for it.
    if (ceil_mode) {
      int64_t ceil_out = (span + *s - 1) / *s + 1;
      if ((ceil_out - 1) * *s >= in + *p) --ceil_out;
      if (ceil_out != floor_out) return std::nullopt;
    }
    pool.k[d] = *k;
    pool.s[d] = *s;
    pool.p[d] = *p;
    pool.out[d] = floor_out;
  }
  return pool;
}

at::Tensor avg_pool_forward(T self, Ints kernel, Ints stride, Ints padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  if (const auto pool = pool_of(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)) {
    c10::DeviceGuard guard(self.device());
    const bool batched = self.dim() == 4;
    const at::Tensor x = batched ? self : self.unsqueeze(0);
    const int64_t n = x.size(0), c = x.size(1), taps = pool->k[0] * pool->k[1];
    const at::Tensor cols = at::im2col(x, {pool->k[0], pool->k[1]}, {1, 1}, {pool->p[0], pool->p[1]},
                                       {pool->s[0], pool->s[1]});
    at::Tensor out = cols.view({n, c, taps, pool->out[0] * pool->out[1]}).mean(2).view({n, c, pool->out[0], pool->out[1]});
    if (x.suggest_memory_format() == at::MemoryFormat::ChannelsLast) out = out.contiguous(at::MemoryFormat::ChannelsLast);
    return batched ? out : out.squeeze(0);
  }
  return run_on_fallback<at::Tensor, T, Ints, Ints, Ints, bool, bool, std::optional<int64_t>>(
      kernel_key(&avg_pool_forward), self, kernel, stride, padding, ceil_mode, count_include_pad,
      divisor_override);
}

at::Tensor avg_pool_backward(T grad_output, T self, Ints kernel, Ints stride, Ints padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  const auto pool = pool_of(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  if (pool && device_float(grad_output) && grad_output.device() == self.device() &&
      grad_output.dim() == self.dim() && grad_output.size(-2) == pool->out[0] && grad_output.size(-1) == pool->out[1]) {
    c10::DeviceGuard guard(self.device());
    const bool batched = self.dim() == 4;
    const at::Tensor g = (batched ? grad_output : grad_output.unsqueeze(0)).to(at::kFloat);
    const int64_t n = g.size(0), c = g.size(1), taps = pool->k[0] * pool->k[1], l = pool->out[0] * pool->out[1];
    // Every tap of a window gets grad / taps: the columns col2im folds back.
    const at::Tensor cols = g.reshape({n, c, 1, l}).div(static_cast<double>(taps)).expand({n, c, taps, l}).reshape(
        {n, c * taps, l});
    at::Tensor grad = at::col2im(cols, {self.size(-2), self.size(-1)}, {pool->k[0], pool->k[1]}, {1, 1},
                                 {pool->p[0], pool->p[1]}, {pool->s[0], pool->s[1]});
    grad = grad.to(self.scalar_type());
    if (self.suggest_memory_format() == at::MemoryFormat::ChannelsLast && batched) {
      grad = grad.contiguous(at::MemoryFormat::ChannelsLast);
    }
    return batched ? grad : grad.squeeze(0);
  }
  return run_on_fallback<at::Tensor, T, T, Ints, Ints, Ints, bool, bool, std::optional<int64_t>>(
      kernel_key(&avg_pool_backward), grad_output, self, kernel, stride, padding, ceil_mode,
      count_include_pad, divisor_override);
}

// Adaptive average pooling whose output divides the input evenly is
// avg_pool2d with kernel = stride = input / output (ATen's windows coincide).
std::optional<std::vector<int64_t>> even_windows(T self, Ints output_size) {
  if ((self.dim() != 3 && self.dim() != 4) || output_size.size() != 2) return std::nullopt;
  std::vector<int64_t> k;
  for (size_t d = 0; d < 2; ++d) {
    const int64_t in = self.size(self.dim() - 2 + d), out = output_size[d];
    if (out <= 0 || in % out != 0) return std::nullopt;
    k.push_back(in / out);
  }
  return k;
}

at::Tensor adaptive_avg_pool_forward(T self, c10::SymIntArrayRef output_size) {
  const auto size = c10::asIntArrayRefSlowOpt(output_size);
  if (size && device_float(self)) {
    if (const auto k = even_windows(self, *size)) return avg_pool_forward(self, *k, *k, {0, 0}, false, true, std::nullopt);
  }
  return run_on_fallback<at::Tensor, T, c10::SymIntArrayRef>(kernel_key(&adaptive_avg_pool_forward),
                                                             self, output_size);
}

at::Tensor adaptive_avg_pool_backward(T grad_output, T self) {
  if (device_float(self) && grad_output.dim() == self.dim() && self.dim() >= 3) {
    if (const auto k = even_windows(self, {grad_output.size(-2), grad_output.size(-1)})) {
      return avg_pool_backward(grad_output, self, *k, *k, {0, 0}, false, true, std::nullopt);
    }
  }
  return run_on_fallback<at::Tensor, T, T>(kernel_key(&adaptive_avg_pool_backward), grad_output,
                                           self);
}

// ATen's nearest_idx (UpSample.h): the source index of each output index.
at::Tensor nearest_indices(int64_t input, int64_t output, std::optional<double> scale, c10::Device device) {
  std::vector<int64_t> idx(static_cast<size_t>(output));
  const float s = scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                                  : static_cast<float>(input) / static_cast<float>(output);
  for (int64_t o = 0; o < output; ++o) {
    if (output == input) idx[o] = o;
    else if (output == 2 * input) idx[o] = o >> 1;
    else idx[o] = std::min(static_cast<int64_t>(std::floor(static_cast<float>(o) * s)), input - 1);
  }
  return at::tensor(idx, at::TensorOptions().dtype(at::kLong)).to(device);
}

c10::List<std::optional<at::Tensor>> nearest_index_list(int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w,
                                                        std::optional<double> scales_h, std::optional<double> scales_w,
                                                        c10::Device device) {
  c10::List<std::optional<at::Tensor>> list;
  list.push_back(std::nullopt);
  list.push_back(std::nullopt);
  list.push_back(nearest_indices(in_h, out_h, scales_h, device).view({out_h, 1}));
  list.push_back(nearest_indices(in_w, out_w, scales_w, device).view({1, out_w}));
  return list;
}

using SymInts = c10::SymIntArrayRef;

at::Tensor nearest_upsample(T self, SymInts output_size, std::optional<double> scales_h,
                              std::optional<double> scales_w) {
  const auto size = c10::asIntArrayRefSlowOpt(output_size);
  if (size && size->size() == 2 && (*size)[0] > 0 && (*size)[1] > 0 && self.dim() == 4 && self.numel() > 0 &&
      self.device().type() == c10::DeviceType::PrivateUse1 && entry_dtype(self.scalar_type()) &&
      runtime_kernels().gather != nullptr) {
    c10::DeviceGuard guard(self.device());
    at::Tensor out = at::index(self, nearest_index_list(self.size(2), self.size(3), (*size)[0], (*size)[1], scales_h,
                                                        scales_w, self.device()));
    if (self.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
      out = out.contiguous(at::MemoryFormat::ChannelsLast);
    }
    return out;
  }
  return run_on_fallback<at::Tensor, T, SymInts, std::optional<double>, std::optional<double>>(
      kernel_key(&nearest_upsample), self, output_size, scales_h, scales_w);
}

at::Tensor nearest_upsample_backward(T grad_output, SymInts output_size, SymInts input_size,
                                       std::optional<double> scales_h, std::optional<double> scales_w) {
  const auto out = c10::asIntArrayRefSlowOpt(output_size);
  const auto in = c10::asIntArrayRefSlowOpt(input_size);
  if (out && in && out->size() == 2 && in->size() == 4 && device_float(grad_output) && grad_output.dim() == 4 &&
      grad_output.size(2) == (*out)[0] && grad_output.size(3) == (*out)[1] && runtime_kernels().scatter != nullptr) {
    c10::DeviceGuard guard(grad_output.device());
    // Accumulated in float32 for 16-bit gradients: one rounding of each sum, as ATen's kernel.
    at::Tensor grad = at::zeros(*in, grad_output.options().dtype(at::kFloat));
    grad.index_put_(nearest_index_list((*in)[2], (*in)[3], (*out)[0], (*out)[1], scales_h, scales_w,
                                       grad_output.device()),
                    grad_output.to(at::kFloat), /*accumulate=*/true);
    return grad.to(grad_output.scalar_type());
  }
  return run_on_fallback<at::Tensor, T, SymInts, SymInts, std::optional<double>, std::optional<double>>(
      kernel_key(&nearest_upsample_backward), grad_output, output_size, input_size, scales_h,
      scales_w);
}

}  // namespace

void register_runtime_resample(Registrar& r) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.im2col != nullptr && kernels.reduce != nullptr && kernels.pointwise != nullptr) {
    r.impl("avg_pool2d", TORCH_FN(avg_pool_forward));
    r.impl("avg_pool2d_backward", TORCH_FN(avg_pool_backward));
    r.impl("_adaptive_avg_pool2d", TORCH_FN(adaptive_avg_pool_forward));
    r.impl("_adaptive_avg_pool2d_backward", TORCH_FN(adaptive_avg_pool_backward));
  }
  if (kernels.gather != nullptr && kernels.scatter != nullptr && kernels.pointwise != nullptr) {
    r.impl("upsample_nearest2d", TORCH_FN(nearest_upsample));
    r.impl("upsample_nearest2d_backward", TORCH_FN(nearest_upsample_backward));
  }
}

}  // namespace kernel_pytorch::native
