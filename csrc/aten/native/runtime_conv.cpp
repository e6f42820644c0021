// Convolution (1-D and 2-D: stride, padding, dilation, groups), unfold/fold
// (aten::im2col / col2im) and max pooling with indices through the runtime's
// entries when device memory is not host addressable.
//
// Convolution is im2col + GEMM: the im2col entry lays a chunk of images out as
// the columns of a GEMM and the gemm entry multiplies each group's weights
// with them. The same two entries give every backward product: the input's
// gradient is W^T times grad_output, folded back by col2im (the im2col
// entry's other direction); the weight's is grad_output times the columns
// transposed (the images of a chunk side by side, so one GEMM per group sums
// over them); the bias's a reduce. Chosen over a direct-convolution entry
// because it reuses the runtime's GEMM (the kernel a chip tunes first), its
// three products and two layouts cover forward and both backward passes with
// one small gather kernel, and it serves unfold/fold too; its cost is the
// column buffer, bounded here by converting kColumnElements at a time.
//
// Transposed convolution reuses the same three products with the roles of
// forward and input gradient exchanged (transposed_forward).
//
// Calls the entries cannot take (3-d convolutions, other
// dtypes, bad arguments, a NOT_SUPPORTED answer) run through the counted
// CPU fallback, which also raises ATen's errors.
#include "runtime_conv.h"

#include <ATen/ATen.h>
#include <ATen/native/Pool.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "core/core.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;
using Ints = at::IntArrayRef;

// Columns converted per chunk of images (at least one image): 64 MiB of float32.
constexpr int64_t kColumnElements = int64_t{1} << 24;

bool usable(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.layout() == at::kStrided && t.device() == like.device() &&
         t.scalar_type() == like.scalar_type() && !t.is_neg() && !t.is_conj();
}

bool device_float(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && entry_float(t.scalar_type()) &&
         usable(t, t);
}

// Element `offset` of t's storage view, as a device pointer.
void* element(const at::Tensor& t, int64_t offset) {
  return static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.element_size());
}

// The d-th of a 2-d parameter list given as one value or one per dimension.
std::optional<int64_t> param(Ints v, size_t d, size_t dims) {
  if (v.size() == 1) return v[0];
  if (v.size() == dims) return v[d];
  return std::nullopt;
}

// [N, C, H, W] strides of a 4-d tensor, or of a 3-d (1-D) one as height 1.
std::array<int64_t, 4> strides4(const at::Tensor& t) {
  if (t.dim() == 3) return {t.stride(0), t.stride(1), 0, t.stride(2)};
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

struct Conv {
  int64_t n, c, h, w, cout, groups, oh, ow;
  kpdrWindow2d window;
  kpdrDtype dtype;
  int64_t taps() const { return window.kernel[0] * window.kernel[1]; }
  int64_t k() const { return c / groups * taps(); }  // the rows of one group's columns
  int64_t rows() const { return c * taps(); }        // the rows of one image's columns
  int64_t p() const { return oh * ow; }              // output positions per image
  int64_t chunk() const { return std::clamp<int64_t>(kColumnElements / std::max<int64_t>(1, rows() * p()), 1, n); }
};

// The (non-transposed) convolution of an input of `sizes` on `like`'s device
// and dtype, if the entries may take it.
std::optional<Conv> conv_of(Ints sizes, T like, T weight, Ints stride, Ints padding, Ints dilation, int64_t groups) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (host_addressable() || kernels.gemm == nullptr || kernels.im2col == nullptr) return std::nullopt;
  if (!device_float(like) || !usable(weight, like) || groups < 1) return std::nullopt;
  const int64_t dims = static_cast<int64_t>(sizes.size());
  if ((dims != 3 && dims != 4) || weight.dim() != dims) return std::nullopt;
  const size_t spatial = static_cast<size_t>(dims - 2);
  Conv c{};
  c.dtype = *entry_dtype(like.scalar_type());
  c.n = sizes[0];
  c.c = sizes[1];
  c.h = dims == 3 ? 1 : sizes[2];
  c.w = sizes[dims - 1];
  c.cout = weight.size(0);
  c.groups = groups;
  if (c.n == 0 || c.c == 0 || c.cout == 0 || c.c % groups != 0 || c.cout % groups != 0 ||
      weight.size(1) * groups != c.c) {
    return std::nullopt;
  }
  const int64_t in[2] = {c.h, c.w};
  int64_t out[2];
  for (size_t d = 0; d < 2; ++d) {
    kpdrWindow2d& w = c.window;
    if (dims == 3 && d == 0) {  // 1-D: a window of height 1
      w.kernel[0] = w.stride[0] = w.dilation[0] = 1;
      w.padding[0] = 0;
      out[0] = 1;
      continue;
    }
    const size_t i = dims == 3 ? 0 : d;
    const auto s = param(stride, i, spatial), p = param(padding, i, spatial), dl = param(dilation, i, spatial);
    if (!s || !p || !dl || *s < 1 || *p < 0 || *dl < 1) return std::nullopt;
    w.kernel[d] = weight.size(2 + i);
    w.stride[d] = *s;
    w.padding[d] = *p;
    w.dilation[d] = *dl;
    const int64_t span = in[d] + 2 * *p - *dl * (w.kernel[d] - 1) - 1;
    if (w.kernel[d] < 1 || span < 0) return std::nullopt;
    out[d] = span / *s + 1;
  }
  c.oh = out[0];
  c.ow = out[1];
  return c;
}

std::optional<Conv> conv_of(T input, T weight, Ints stride, Ints padding, Ints dilation, int64_t groups) {
  return conv_of(input.sizes(), input, weight, stride, padding, dilation, groups);
}

// A transposed convolution of `input` is the input gradient of the ordinary
// convolution whose output has input's shape and whose input has the
// transposed output's shape (same weight: [c_in, c_out / groups, k...]).
// Returns that convolution and the transposed output's sizes.
std::optional<std::pair<Conv, std::vector<int64_t>>> transposed_conv_of(T input, T weight, Ints stride, Ints padding,
                                                                        Ints dilation, Ints output_padding,
                                                                        int64_t groups) {
  const int64_t dims = input.dim();
  if ((dims != 3 && dims != 4) || weight.dim() != dims || groups < 1 || input.size(1) != weight.size(0)) {
    return std::nullopt;
  }
  const size_t spatial = static_cast<size_t>(dims - 2);
  std::vector<int64_t> sizes = {input.size(0), weight.size(1) * groups};
  for (size_t i = 0; i < spatial; ++i) {
    const auto s = param(stride, i, spatial), p = param(padding, i, spatial), dl = param(dilation, i, spatial),
               op = param(output_padding, i, spatial);
    // ATen's rule: output padding smaller than stride or dilation.
    if (!s || !p || !dl || !op || *s < 1 || *dl < 1 || *op < 0 || (*op >= *s && *op >= *dl)) return std::nullopt;
    const int64_t size = (input.size(2 + i) - 1) * *s - 2 * *p + *dl * (weight.size(2 + i) - 1) + *op + 1;
    if (size < 1) return std::nullopt;
    sizes.push_back(size);
  }
  auto c = conv_of(sizes, input, weight, stride, padding, dilation, groups);
  // The ordinary convolution must give back input's spatial shape.
  if (!c || c->cout != input.size(1) || c->ow != input.size(-1) || (dims == 4 && c->oh != input.size(2))) {
    return std::nullopt;
  }
  return std::make_pair(*c, sizes);
}

// Images [n0, n0 + nb) of `image` to or from columns (col_batch_stride, col_ld).
bool columns(const Conv& c, int32_t direction, const at::Tensor& image, int64_t n0, int64_t nb, const at::Tensor& col,
             int64_t col_batch_stride, int64_t col_ld) {
  kpdrIm2colArgs a{};
  a.direction = direction;
  a.dtype = c.dtype;
  a.batch = nb;
  a.channels = c.c;
  a.height = c.h;
  a.width = c.w;
  a.out_h = c.oh;
  a.out_w = c.ow;
  a.window = c.window;
  const auto s = strides4(image);
  std::copy(s.begin(), s.end(), a.image_strides);
  a.image = element(image, n0 * image.stride(0));
  a.col = col.data_ptr();
  a.col_batch_stride = col_batch_stride;
  a.col_ld = col_ld;
  return launch_kernel(runtime_kernels().im2col, a, current_stream(image.device().index()));
}

struct Matrix {
  void* data;
  int64_t batch_stride, ld;
};

// C = op(A) op(B) (+ C with accumulate) over `batch` matrices.
bool gemm(const Conv& c, c10::DeviceIndex device, int64_t batch, int64_t m, int64_t n, int64_t k, int32_t ta,
          int32_t tb, Matrix a, Matrix b, Matrix out, bool accumulate) {
  kpdrGemmArgs g{};
  g.dtype = c.dtype;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = ta;
  g.trans_b = tb;
  g.a = a.data;
  g.a_batch_stride = a.batch_stride;
  g.a_ld = a.ld;
  g.b = b.data;
  g.b_batch_stride = b.batch_stride;
  g.b_ld = b.ld;
  g.c = out.data;
  g.c_batch_stride = out.batch_stride;
  g.c_ld = out.ld;
  g.alpha = 1.0f;
  g.beta = accumulate ? 1.0f : 0.0f;
  return launch_kernel(runtime_kernels().gemm, g, current_stream(device));
}

std::optional<at::Tensor> forward(T input, T weight, const std::optional<at::Tensor>& bias, const Conv& c) {
  const bool with_bias = bias.has_value() && bias->defined();
  if (with_bias && (!usable(*bias, input) || bias->dim() != 1 || bias->size(0) != c.cout)) return std::nullopt;
  c10::DeviceGuard guard(input.device());
  const c10::DeviceIndex device = input.device().index();
  const at::Tensor w = weight.contiguous();  // [cout, k] per group, rows contiguous
  at::Tensor out = at::empty({c.n, c.cout, c.oh, c.ow}, input.options());
  const int64_t chunk = c.chunk(), k = c.k(), p = c.p(), per_group = c.cout / c.groups;
  // The bias goes in first and the GEMM adds to it (beta = 1): one rounding
  // of the sum to a 16-bit dtype, as the CPU's convolution rounds, not two.
  if (with_bias) out.copy_(bias->view({1, c.cout, 1, 1}).expand_as(out));
  const at::Tensor col = at::empty({chunk * c.rows() * p}, input.options());
  for (int64_t n0 = 0; n0 < c.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, c.n - n0);
    if (!columns(c, KPDR_IM2COL, input, n0, nb, col, c.rows() * p, p)) return std::nullopt;
    for (int64_t g = 0; g < c.groups; ++g) {
      // out[n, group g] (per_group x p) = W[g] (per_group x k) * col[n, group g] (k x p)
      if (!gemm(c, device, nb, per_group, p, k, 0, 0, {element(w, g * per_group * k), 0, k},
                {element(col, g * k * p), c.rows() * p, p},
                {element(out, (n0 * c.cout + g * per_group) * p), c.cout * p, p}, with_bias)) {
        return std::nullopt;
      }
    }
  }
  if (input.dim() == 3) return out.view({c.n, c.cout, c.ow});
  if (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast) {
    return out.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return out;
}

// The input gradient of convolution `c` (an input of `sizes`) from its
// output gradient `go` [n, cout, oh, ow]: W^T go, folded back by col2im.
std::optional<at::Tensor> input_gradient(const at::Tensor& go, T weight, const Conv& c, Ints sizes,
                                         const at::TensorOptions& options, at::MemoryFormat format) {
  const c10::DeviceIndex device = go.device().index();
  const int64_t chunk = c.chunk(), k = c.k(), p = c.p(), per_group = c.cout / c.groups;
  // In float32 for 16-bit dtypes: col2im sums overlapping windows, and
  // columns rounded to 16 bits first would round the sum twice (the CPU
  // rounds once).
  const at::ScalarType acc = at::kFloat;
  Conv cf = c;
  cf.dtype = KPDR_DTYPE_FLOAT32;
  const at::Tensor w = weight.to(acc).contiguous();
  const at::Tensor gof = go.to(acc).contiguous();
  at::Tensor gi = at::empty(sizes, options.dtype(acc).memory_format(format));
  const at::Tensor col = at::empty({chunk * c.rows() * p}, options.dtype(acc));
  for (int64_t n0 = 0; n0 < c.n; n0 += chunk) {
    const int64_t nb = std::min(chunk, c.n - n0);
    for (int64_t g = 0; g < c.groups; ++g) {
      // col[n, group g] (k x p) = W[g]^T (k x per_group) * grad_output[n, group g] (per_group x p)
      if (!gemm(cf, device, nb, k, p, per_group, 1, 0, {element(w, g * per_group * k), 0, k},
                {element(gof, (n0 * c.cout + g * per_group) * p), c.cout * p, p},
                {element(col, g * k * p), c.rows() * p, p}, false)) {
        return std::nullopt;
      }
    }
    if (!columns(cf, KPDR_COL2IM, gi, n0, nb, col, c.rows() * p, p)) return std::nullopt;
  }
  const at::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  return gi.scalar_type() == dtype ? gi : gi.to(dtype);
}

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

std::optional<Grads> backward(T grad_output, T input, T weight, const Conv& c, std::array<bool, 3> mask) {
  if (!usable(grad_output, input) || grad_output.dim() != input.dim() || grad_output.size(0) != c.n ||
      grad_output.size(1) != c.cout || grad_output.size(-1) != c.ow || (input.dim() == 4 && grad_output.size(2) != c.oh)) {
    return std::nullopt;
  }
  c10::DeviceGuard guard(input.device());
  const c10::DeviceIndex device = input.device().index();
  const at::Tensor go = grad_output.contiguous().view({c.n, c.cout, c.oh, c.ow});
  const int64_t chunk = c.chunk(), k = c.k(), p = c.p(), per_group = c.cout / c.groups;
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) {
    auto gi = input_gradient(go, weight, c, input.sizes(), input.options(), input.suggest_memory_format());
    if (!gi) return std::nullopt;
    grad_input = *gi;
  }
  if (mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options().memory_format(at::MemoryFormat::Contiguous));
    // grad_output as [cout, n * p]: each group's rows against the chunk's columns side by side.
    const at::Tensor go_t = go.view({c.n, c.cout, p}).transpose(0, 1).contiguous();
    const at::Tensor col = at::empty({c.rows() * chunk * p}, input.options());
    for (int64_t n0 = 0; n0 < c.n; n0 += chunk) {
      const int64_t nb = std::min(chunk, c.n - n0);
      if (!columns(c, KPDR_IM2COL, input, n0, nb, col, p, nb * p)) return std::nullopt;
      for (int64_t g = 0; g < c.groups; ++g) {
        // dW[g] (per_group x k) (+)= grad_output[group g] (per_group x nb*p) * col[group g]^T (nb*p x k)
        if (!gemm(c, device, 1, per_group, k, nb * p, 0, 1, {element(go_t, g * per_group * c.n * p + n0 * p), 0, c.n * p},
                  {element(col, g * k * nb * p), 0, nb * p}, {element(grad_weight, g * per_group * k), 0, k}, n0 > 0)) {
          return std::nullopt;
        }
      }
    }
  }
  if (mask[2]) grad_bias = at::sum(go, {0, 2, 3});
  return Grads{grad_input, grad_weight, grad_bias};
}

// Transposed convolution (nn.ConvTranspose1d/2d) through the same products:
// its output is the ordinary convolution's input gradient; its input
// gradient that convolution's output; its weight gradient that convolution's
// weight gradient with the roles of input and output gradient exchanged.
std::optional<at::Tensor> transposed_forward(T input, T weight, const std::optional<at::Tensor>& bias, const Conv& c,
                                             const std::vector<int64_t>& sizes) {
  const bool with_bias = bias.has_value() && bias->defined();
  if (with_bias && (!usable(*bias, input) || bias->dim() != 1 || bias->size(0) != c.c)) return std::nullopt;
  c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.dim() == 3 ? input.unsqueeze(2) : input;
  std::vector<int64_t> sizes4 = sizes;
  if (input.dim() == 3) sizes4.insert(sizes4.begin() + 2, 1);
  auto out = input_gradient(x, weight, c, sizes4, input.options(), input.suggest_memory_format());
  if (!out) return std::nullopt;
  if (with_bias) out->add_(bias->view({1, c.c, 1, 1}));
  return input.dim() == 3 ? out->squeeze(2) : *out;
}

std::optional<Grads> transposed_backward(T grad_output, T input, T weight, Ints stride, Ints padding, Ints dilation,
                                         int64_t groups, std::array<bool, 3> mask) {
  // The ordinary convolution of grad_output (shaped like the transposed output).
  const auto c = conv_of(grad_output, weight, stride, padding, dilation, groups);
  if (!c || !usable(grad_output, input) || grad_output.dim() != input.dim() || c->cout != input.size(1) ||
      c->ow != input.size(-1) || (input.dim() == 4 && c->oh != input.size(2)) || c->n != input.size(0)) {
    return std::nullopt;
  }
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) {
    auto gi = forward(grad_output, weight, std::nullopt, *c);
    if (!gi) return std::nullopt;
    grad_input = input.suggest_memory_format() == at::MemoryFormat::ChannelsLast
                     ? gi->contiguous(at::MemoryFormat::ChannelsLast)
                     : gi->contiguous();
  }
  if (mask[1]) {
    auto g = backward(input, grad_output, weight, *c, {false, true, false});
    if (!g) return std::nullopt;
    grad_weight = std::get<1>(*g);
  }
  if (mask[2]) {
    // An explicit IntArrayRef: torch 2.11's headers find `{0, 2}` ambiguous (OptionalIntArrayRef or DimnameList).
    const std::vector<int64_t> dims = input.dim() == 3 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{0, 2, 3};
    grad_bias = at::sum(grad_output, at::IntArrayRef(dims));
  }
  return Grads{grad_input, grad_weight, grad_bias};
}

std::optional<std::vector<int64_t>> ints(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  return std::nullopt;  // symbolic sizes: not a real device call
}

// ---- max pooling ------------------------------------------------------------

struct Pool {
  int64_t n, c, h, w, oh, ow;
  kpdrWindow2d window;
};

std::optional<Pool> pool_of(T self, Ints kernel, Ints stride, Ints padding, Ints dilation, bool ceil_mode) {
  if (host_addressable() || runtime_kernels().max_pool2d == nullptr || !device_float(self)) return std::nullopt;
  if ((self.dim() != 3 && self.dim() != 4) || self.numel() == 0) return std::nullopt;
  Pool p{};
  p.n = self.dim() == 4 ? self.size(0) : 1;
  p.c = self.size(-3);
  p.h = self.size(-2);
  p.w = self.size(-1);
  const int64_t in[2] = {p.h, p.w};
  int64_t out[2];
  for (size_t d = 0; d < 2; ++d) {
    const auto k = param(kernel, d, 2);
    const auto s = stride.empty() ? k : param(stride, d, 2);
    const auto pad = param(padding, d, 2), dl = param(dilation, d, 2);
    if (!k || !s || !pad || !dl || *k < 1 || *s < 1 || *dl < 1 || *pad < 0 || *pad > *k / 2) return std::nullopt;
    out[d] = at::native::pooling_output_shape<int64_t>(in[d], *k, *pad, *s, *dl, ceil_mode);
    if (out[d] < 1) return std::nullopt;
    p.window.kernel[d] = *k;
    p.window.stride[d] = *s;
    p.window.padding[d] = *pad;
    p.window.dilation[d] = *dl;
  }
  p.oh = out[0];
  p.ow = out[1];
  return p;
}

std::vector<int64_t> pool_sizes(T self, const Pool& p) {
  if (self.dim() == 3) return {p.c, p.oh, p.ow};
  return {p.n, p.c, p.oh, p.ow};
}

// [N, C, H, W] strides of a pooling tensor (a 3-d one as batch 1).
std::array<int64_t, 4> pool_strides(const at::Tensor& t) {
  if (t.dim() == 3) return {0, t.stride(0), t.stride(1), t.stride(2)};
  return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

bool pool_launch(const Pool& p, int32_t direction, const at::Tensor& input, const at::Tensor& out,
                 const at::Tensor& indices) {
  kpdrMaxPool2dArgs a{};
  a.direction = direction;
  a.dtype = *entry_dtype(input.scalar_type());
  a.batch = p.n;
  a.channels = p.c;
  a.height = p.h;
  a.width = p.w;
  a.out_h = p.oh;
  a.out_w = p.ow;
  a.window = p.window;
  a.input = input.data_ptr();
  a.out = out.data_ptr();
  a.indices = indices.data_ptr<int64_t>();
  const auto is = pool_strides(input), os = pool_strides(out), xs = pool_strides(indices);
  std::copy(is.begin(), is.end(), a.input_strides);
  std::copy(os.begin(), os.end(), a.out_strides);
  std::copy(xs.begin(), xs.end(), a.indices_strides);
  c10::DeviceGuard guard(input.device());
  return launch_kernel(runtime_kernels().max_pool2d, a, current_stream(input.device().index()));
}

struct MaxPool {
  static std::tuple<at::Tensor, at::Tensor> forward(T self, Ints kernel, Ints stride, Ints padding, Ints dilation,
                                                    bool ceil_mode) {
    if (auto p = pool_of(self, kernel, stride, padding, dilation, ceil_mode)) {
      const auto format = self.dim() == 4 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
      at::Tensor out = at::empty(pool_sizes(self, *p), self.options().memory_format(format));
      at::Tensor indices = at::empty(pool_sizes(self, *p), self.options().dtype(at::kLong).memory_format(format));
      if (pool_launch(*p, KPDR_MAX_POOL_FORWARD, self, out, indices)) return {out, indices};
    }
    return run_on_fallback<std::tuple<at::Tensor, at::Tensor>, T, Ints, Ints, Ints, Ints, bool>(
        kernel_key(&forward), self, kernel, stride, padding, dilation, ceil_mode);
  }
  static at::Tensor backward(T grad_output, T self, Ints kernel, Ints stride, Ints padding, Ints dilation,
                             bool ceil_mode, T indices) {
    if (auto p = pool_of(self, kernel, stride, padding, dilation, ceil_mode)) {
      const auto sizes = pool_sizes(self, *p);
      if (usable(grad_output, self) && grad_output.sizes() == at::IntArrayRef(sizes) && indices.defined() &&
          indices.device() == self.device() && indices.scalar_type() == at::kLong &&
          indices.layout() == at::kStrided && indices.sizes() == at::IntArrayRef(sizes)) {
        const auto format = self.dim() == 4 ? self.suggest_memory_format() : at::MemoryFormat::Contiguous;
        at::Tensor grad_input = at::empty(self.sizes(), self.options().memory_format(format));
        if (pool_launch(*p, KPDR_MAX_POOL_BACKWARD, grad_input, grad_output, indices)) return grad_input;
      }
    }
    return run_on_fallback<at::Tensor, T, T, Ints, Ints, Ints, Ints, bool, T>(
        kernel_key(&backward), grad_output, self, kernel, stride, padding, dilation, ceil_mode,
        indices);
  }
};

// ---- unfold / fold (aten::im2col, aten::col2im) ------------------------------

// The window of im2col/col2im's four 2-value lists, or nullopt.
std::optional<kpdrWindow2d> unfold_window(Ints kernel, Ints dilation, Ints padding, Ints stride) {
  if (kernel.size() != 2 || dilation.size() != 2 || padding.size() != 2 || stride.size() != 2) return std::nullopt;
  kpdrWindow2d w{};
  for (size_t d = 0; d < 2; ++d) {
    if (kernel[d] < 1 || dilation[d] < 1 || padding[d] < 0 || stride[d] < 1) return std::nullopt;
    w.kernel[d] = kernel[d];
    w.dilation[d] = dilation[d];
    w.padding[d] = padding[d];
    w.stride[d] = stride[d];
  }
  return w;
}

// Output positions of a window along one dimension (0 when none fits).
int64_t positions(int64_t size, const kpdrWindow2d& w, size_t d) {
  const int64_t span = size + 2 * w.padding[d] - w.dilation[d] * (w.kernel[d] - 1) - 1;
  return span < 0 ? 0 : span / w.stride[d] + 1;
}

bool unfold_eligible(T self) {
  return !host_addressable() && runtime_kernels().im2col != nullptr && device_float(self) && self.numel() > 0;
}

struct Unfold {
  static at::Tensor im2col(T self, Ints kernel, Ints dilation, Ints padding, Ints stride) {
    const auto w = unfold_window(kernel, dilation, padding, stride);
    if (w && unfold_eligible(self) && (self.dim() == 3 || self.dim() == 4)) {
      const bool batched = self.dim() == 4;
      Conv c{};
      c.dtype = *entry_dtype(self.scalar_type());
      c.n = batched ? self.size(0) : 1;
      c.c = self.size(-3);
      c.h = self.size(-2);
      c.w = self.size(-1);
      c.window = *w;
      c.oh = positions(c.h, *w, 0);
      c.ow = positions(c.w, *w, 1);
      if (c.oh > 0 && c.ow > 0) {
        c10::DeviceGuard guard(self.device());
        const at::Tensor image = batched ? self : self.unsqueeze(0);
        at::Tensor col = at::empty({c.n, c.rows(), c.p()}, self.options());
        if (columns(c, KPDR_IM2COL, image, 0, c.n, col, c.rows() * c.p(), c.p())) return batched ? col : col.squeeze(0);
      }
    }
    return run_on_fallback<at::Tensor, T, Ints, Ints, Ints, Ints>(kernel_key(&im2col), self, kernel,
                                                                  dilation, padding, stride);
  }
  static at::Tensor col2im(T self, c10::SymIntArrayRef output_size, Ints kernel, Ints dilation, Ints padding,
                           Ints stride) {
    const auto w = unfold_window(kernel, dilation, padding, stride);
    const auto size = c10::asIntArrayRefSlowOpt(output_size);
    if (w && size && size->size() == 2 && unfold_eligible(self) && (self.dim() == 2 || self.dim() == 3)) {
      const bool batched = self.dim() == 3;
      Conv c{};
      c.dtype = *entry_dtype(self.scalar_type());
      c.n = batched ? self.size(0) : 1;
      c.h = (*size)[0];
      c.w = (*size)[1];
      c.window = *w;
      c.oh = positions(c.h, *w, 0);
      c.ow = positions(c.w, *w, 1);
      const int64_t taps = w->kernel[0] * w->kernel[1];
      if (c.h > 0 && c.w > 0 && self.size(-2) % taps == 0 && self.size(-1) == c.oh * c.ow && c.oh * c.ow > 0) {
        c.c = self.size(-2) / taps;
        c10::DeviceGuard guard(self.device());
        const at::Tensor col = (batched ? self : self.unsqueeze(0)).contiguous();
        at::Tensor image = at::empty({c.n, c.c, c.h, c.w}, self.options());
        if (columns(c, KPDR_COL2IM, image, 0, c.n, col, c.rows() * c.p(), c.p())) {
          return batched ? image : image.squeeze(0);
        }
      }
    }
    return run_on_fallback<at::Tensor, T, c10::SymIntArrayRef, Ints, Ints, Ints, Ints>(
        kernel_key(&col2im), self, output_size, kernel, dilation, padding, stride);
  }
};

}  // namespace

bool runtime_convolution(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (host_addressable()) return false;
  const bool is_backward = op.schema().name() == "aten::convolution_backward";
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  auto arg = [&](size_t i) -> const c10::IValue& { return (*stack)[base + i]; };
  if (!is_backward) {
    // convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
    if (!arg(0).isTensor() || !arg(1).isTensor()) return false;
    const auto stride = ints(arg(3)), padding = ints(arg(4)), dilation = ints(arg(5));
    if (!stride || !padding || !dilation || !arg(8).isInt()) return false;
    const at::Tensor input = arg(0).toTensor(), weight = arg(1).toTensor();
    const auto bias = arg(2).toOptional<at::Tensor>();
    std::optional<at::Tensor> out;
    if (arg(6).toBool()) {
      const auto output_padding = ints(arg(7));
      if (!output_padding) return false;
      const auto t = transposed_conv_of(input, weight, *stride, *padding, *dilation, *output_padding, arg(8).toInt());
      if (!t) return false;
      out = transposed_forward(input, weight, bias, t->first, t->second);
    } else {
      const auto c = conv_of(input, weight, *stride, *padding, *dilation, arg(8).toInt());
      if (!c) return false;
      out = forward(input, weight, bias, *c);
    }
    if (!out) return false;
    torch::jit::drop(*stack, n);
    torch::jit::push(*stack, std::move(*out));
    return true;
  }
  // convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed,
  //                      output_padding, groups, output_mask)
  if (!arg(0).isTensor() || !arg(1).isTensor() || !arg(2).isTensor()) return false;
  const auto stride = ints(arg(4)), padding = ints(arg(5)), dilation = ints(arg(6));
  if (!stride || !padding || !dilation || !arg(9).isInt()) return false;
  const at::Tensor grad_output = arg(0).toTensor(), input = arg(1).toTensor(), weight = arg(2).toTensor();
  const auto mask_list = arg(10).toBoolList();
  if (mask_list.size() != 3) return false;
  const std::array<bool, 3> mask = {mask_list[0], mask_list[1], mask_list[2]};
  if (mask[2] && (runtime_kernels().reduce == nullptr)) return false;
  std::optional<Grads> grads;
  if (arg(7).toBool()) {
    // The transposed convolution's own output shape must be what its
    // forward gives (output_padding included).
    const auto output_padding = ints(arg(8));
    if (!output_padding) return false;
    const auto t = transposed_conv_of(input, weight, *stride, *padding, *dilation, *output_padding, arg(9).toInt());
    if (!t || grad_output.sizes() != at::IntArrayRef(t->second)) return false;
    grads = transposed_backward(grad_output, input, weight, *stride, *padding, *dilation, arg(9).toInt(), mask);
  } else {
    const auto c = conv_of(input, weight, *stride, *padding, *dilation, arg(9).toInt());
    if (!c) return false;
    grads = backward(grad_output, input, weight, *c, mask);
  }
  if (!grads) return false;
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::get<0>(*grads), std::get<1>(*grads), std::get<2>(*grads));
  return true;
}

void register_runtime_pooling(Registrar& r) {
  if (runtime_kernels().max_pool2d == nullptr) return;
  r.impl("max_pool2d_with_indices", TORCH_FN(MaxPool::forward));
  r.impl("max_pool2d_with_indices_backward", TORCH_FN(MaxPool::backward));
}

void register_runtime_unfold(Registrar& r) {
  if (runtime_kernels().im2col == nullptr) return;
  r.impl("im2col", TORCH_FN(Unfold::im2col));
  r.impl("col2im", TORCH_FN(Unfold::col2im));
}

}  // namespace kernel_pytorch::native
