// The softmax family (_softmax, _log_softmax and their _backward_data, any
// dim, half_to_float), nll_loss / nll_loss2d forward and backward (so
// F.cross_entropy, label smoothing included through its composite), and
// native_layer_norm forward and backward through the runtime's softmax_dim,
// nll_loss and layer_norm entries (kpdr.h's core-op section) when device
// memory is not host addressable.
//
// Outputs are allocated as ATen's CPU kernels allocate them (contiguous);
// the entries get every operand's strides. What an entry cannot take
// (dtypes, shapes ATen rejects, out-of-range dims, more than KPDR_MAX_DIMS
// dimensions, a NOT_SUPPORTED answer) runs through the counted CPU fallback,
// which also raises ATen's errors.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <initializer_list>
#include <optional>
#include <tuple>
#include <vector>

#include "core/core.h"
#include "host_kernels.h"
#include "runtime_pointwise.h"

namespace kernel_pytorch::native {
namespace {

using T = const at::Tensor&;
using OptT = const std::optional<at::Tensor>&;

// Strided float tensors of one my_asic device (undefined ones skipped).
bool eligible(std::initializer_list<const at::Tensor*> tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (t->device().type() != c10::DeviceType::PrivateUse1 || t->layout() != at::kStrided || t->is_neg() ||
        t->is_conj() || !entry_float(t->scalar_type()) || t->dim() > KPDR_MAX_DIMS) {
      return false;
    }
    if (device && *device != t->device()) return false;
    device = t->device();
  }
  return device.has_value();
}

std::optional<int64_t> wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t bound = std::max<int64_t>(ndim, 1);
  if (dim < -bound || dim >= bound) return std::nullopt;
  return dim < 0 ? dim + bound : dim;
}

// ---- softmax family ---------------------------------------------------------

kpdrOperand operand(T t) {
  kpdrOperand o{};
  o.data = t.const_data_ptr();
  o.dtype = *entry_dtype(t.scalar_type());
  for (int64_t d = 0; d < t.dim(); ++d) o.strides[d] = t.stride(d);
  if (t.dim() == 0) o.strides[0] = 1;
  return o;
}

// out = op over `dim` of x (forward) or of (x = the forward's output, grad);
// undefined when the entry cannot take it.
at::Tensor softmax_dim(int32_t op, T x, T grad, int64_t dim, at::ScalarType out_type) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.softmax_dim == nullptr || !entry_float(out_type)) return at::Tensor();
  const at::Tensor& shape_of = grad.defined() ? grad : x;
  at::Tensor out = at::empty(shape_of.sizes(), shape_of.options().dtype(out_type));
  kpdrSoftmaxDimArgs args{};
  args.op = op;
  args.ndim = static_cast<int32_t>(std::max<int64_t>(x.dim(), 1));
  args.dim = static_cast<int32_t>(dim);
  for (int64_t d = 0; d < args.ndim; ++d) args.sizes[d] = x.dim() == 0 ? 1 : x.size(d);
  args.out_dtype = *entry_dtype(out_type);
  for (int64_t d = 0; d < out.dim(); ++d) args.out_strides[d] = out.stride(d);
  if (out.dim() == 0) args.out_strides[0] = 1;
  c10::DeviceGuard guard(x.device());
  if (out.numel() == 0) return out;
  args.out = out.mutable_data_ptr();
  args.x = operand(x);
  if (grad.defined()) args.grad = operand(grad);
  if (!launch_kernel(kernels.softmax_dim, args, current_stream(x.device().index()))) return at::Tensor();
  return out;
}

template <int32_t op>
struct Softmax {
  static at::Tensor forward(T self, int64_t dim, bool half_to_float) {
    if (eligible({&self})) {
      if (auto d = wrap_dim(dim, self.dim())) {
        const bool widen = half_to_float && self.scalar_type() == at::kHalf;
        if (!half_to_float || widen) {  // ATen accepts half_to_float for half inputs only
          at::Tensor r = softmax_dim(op, self, at::Tensor(), *d, widen ? at::kFloat : self.scalar_type());
          if (r.defined()) return r;
        }
      }
    }
    return run_on_fallback<at::Tensor, T, int64_t, bool>(kernel_key(&forward), self, dim,
                                                         half_to_float);
  }
  static at::Tensor backward(T grad_output, T output, int64_t dim, at::ScalarType input_dtype) {
    if (eligible({&grad_output, &output}) && grad_output.sizes() == output.sizes() && entry_float(input_dtype)) {
      if (auto d = wrap_dim(dim, output.dim())) {
        at::Tensor r = softmax_dim(op + 2, output, grad_output, *d, input_dtype);
        if (r.defined()) return r;
      }
    }
    return run_on_fallback<at::Tensor, T, T, int64_t, at::ScalarType>(kernel_key(&backward),
                                                                      grad_output, output, dim, input_dtype);
  }
};

// ---- nll_loss ---------------------------------------------------------------

// The input as [batch, classes, spatial] and the target as [batch, spatial]
// (1-D: one sample; 4-D nll_loss2d: spatial = H * W, collapsed when its
// strides allow, else read from a device-side contiguous copy).
struct NllShape {
  at::Tensor input, target;  // possibly contiguous copies
  int64_t batch = 1, classes = 1, spatial = 1;
  int64_t in_strides[3] = {0, 0, 0};
  int64_t target_strides[2] = {0, 0};
};

std::optional<NllShape> nll_shape(T self, T target, OptT weight, bool two_d) {
  // ATen takes int64 (or uint8, which the entry has no dtype for) targets; the fallback raises for others.
  if (target.device() != self.device() || target.layout() != at::kStrided || target.scalar_type() != at::kLong) {
    return std::nullopt;
  }
  NllShape s;
  s.input = self;
  s.target = target;
  if (!two_d) {
    if (self.dim() < 1 || self.dim() > 2 || target.dim() > 1) return std::nullopt;
    if (self.dim() == 2 && (target.dim() != 1 || target.size(0) != self.size(0))) return std::nullopt;
    if (self.dim() == 1 && target.dim() != 0) return std::nullopt;
    if (self.dim() == 2) {
      s.batch = self.size(0);
      s.classes = self.size(1);
      s.in_strides[0] = self.stride(0);
      s.in_strides[1] = self.stride(1);
      s.target_strides[0] = target.stride(0);
    } else {
      s.classes = self.size(0);
      s.in_strides[1] = self.stride(0);
    }
  } else {
    if (self.dim() != 4 || target.dim() != 3 || target.size(0) != self.size(0) || target.size(1) != self.size(2) ||
        target.size(2) != self.size(3)) {
      return std::nullopt;
    }
    const int64_t W = self.size(3);
    if (self.size(2) > 1 && self.stride(2) != self.stride(3) * W) s.input = self.contiguous();
    if (target.size(1) > 1 && target.stride(1) != target.stride(2) * W) s.target = target.contiguous();
    s.batch = self.size(0);
    s.classes = self.size(1);
    s.spatial = self.size(2) * W;
    s.in_strides[0] = s.input.stride(0);
    s.in_strides[1] = s.input.stride(1);
    s.in_strides[2] = s.input.stride(3);
    s.target_strides[0] = s.target.stride(0);
    s.target_strides[1] = s.target.stride(2);
  }
  if (weight.has_value() && weight->defined()) {
    if (weight->scalar_type() != self.scalar_type() || weight->dim() != 1 || weight->numel() != s.classes) {
      return std::nullopt;
    }
  }
  return s;
}

kpdrNllLossArgs nll_args(const NllShape& s, T self, OptT weight, int64_t reduction, int64_t ignore_index) {
  kpdrNllLossArgs args{};
  args.reduction = static_cast<int32_t>(reduction);
  args.dtype = *entry_dtype(self.scalar_type());
  args.target_dtype = s.target.scalar_type() == at::kLong ? KPDR_DTYPE_INT64 : KPDR_DTYPE_INT32;
  args.batch = s.batch;
  args.classes = s.classes;
  args.spatial = s.spatial;
  args.ignore_index = ignore_index;
  args.target = s.target.numel() > 0 ? s.target.const_data_ptr() : nullptr;
  args.target_strides[0] = s.target_strides[0];
  args.target_strides[1] = s.target_strides[1];
  if (weight.has_value() && weight->defined()) {
    args.weight = weight->const_data_ptr();
    args.weight_stride = weight->stride(0);
  }
  return args;
}

// The shape of reduction none's output: the target's (nll_loss2d: [N, H, W]).
void none_strides(T out, bool two_d, int64_t* strides) {
  if (out.dim() == 0) return;
  strides[0] = out.stride(0);
  if (two_d) strides[1] = out.stride(2);
}

template <bool two_d>
struct Nll {
  static std::tuple<at::Tensor, at::Tensor> forward(T self, T target, OptT weight, int64_t reduction,
                                                    int64_t ignore_index) {
    const kpdrKernelTable& kernels = runtime_kernels();
    const at::Tensor& w = weight.has_value() ? *weight : at::Tensor();
    if (kernels.nll_loss != nullptr && eligible({&self, &w}) && reduction >= 0 && reduction <= 2) {
      if (auto s = nll_shape(self, target, weight, two_d)) {
        kpdrNllLossArgs args = nll_args(*s, self, weight, reduction, ignore_index);
        std::vector<int64_t> shape;
        if (reduction == 0) shape = target.sizes().vec();
        at::Tensor out = at::empty(shape, self.options());
        at::Tensor total_weight = at::empty({}, self.options());
        args.input = s->input.numel() > 0 ? s->input.const_data_ptr() : nullptr;
        for (int d = 0; d < 3; ++d) args.input_strides[d] = s->in_strides[d];
        args.out = out.numel() > 0 ? out.mutable_data_ptr() : nullptr;
        none_strides(out, two_d, args.out_strides);
        args.total_weight = total_weight.mutable_data_ptr();
        c10::DeviceGuard guard(self.device());
        if (launch_kernel(kernels.nll_loss, args, current_stream(self.device().index()))) {
          return {out, total_weight};
        }
      }
    }
    return run_on_fallback<std::tuple<at::Tensor, at::Tensor>, T, T, OptT, int64_t, int64_t>(
        kernel_key(&forward), self, target, weight, reduction, ignore_index);
  }

  static at::Tensor backward(T grad_output, T self, T target, OptT weight, int64_t reduction, int64_t ignore_index,
                             T total_weight) {
    const kpdrKernelTable& kernels = runtime_kernels();
    const at::Tensor& w = weight.has_value() ? *weight : at::Tensor();
    if (kernels.nll_loss != nullptr && eligible({&grad_output, &self, &w, &total_weight}) && reduction >= 0 &&
        reduction <= 2 && grad_output.scalar_type() == self.scalar_type() &&
        total_weight.scalar_type() == self.scalar_type() && total_weight.numel() == 1) {
      const bool shaped = reduction == 0 ? grad_output.sizes() == target.sizes() : grad_output.numel() == 1;
      auto s = shaped ? nll_shape(self, target, weight, two_d) : std::nullopt;
      if (s) {
        kpdrNllLossArgs args = nll_args(*s, self, weight, reduction, ignore_index);
        args.backward = 1;
        at::Tensor grad_input = at::empty(self.sizes(), self.options());
        args.grad_input = grad_input.numel() > 0 ? grad_input.mutable_data_ptr() : nullptr;
        args.grad_input_strides[0] = two_d || self.dim() == 2 ? grad_input.stride(0) : 0;
        args.grad_input_strides[1] = two_d || self.dim() == 2 ? grad_input.stride(1) : grad_input.stride(0);
        args.grad_input_strides[2] = two_d ? grad_input.stride(3) : 0;
        args.grad_output = grad_output.numel() > 0 ? grad_output.const_data_ptr() : nullptr;
        if (reduction == 0) none_strides(grad_output, two_d, args.out_strides);
        args.total_weight = const_cast<void*>(total_weight.const_data_ptr());
        c10::DeviceGuard guard(self.device());
        if (launch_kernel(kernels.nll_loss, args, current_stream(self.device().index()))) return grad_input;
      }
    }
    return run_on_fallback<at::Tensor, T, T, T, OptT, int64_t, int64_t, T>(
        kernel_key(&backward), grad_output, self, target, weight, reduction, ignore_index,
        total_weight);
  }
};

// ---- layer_norm -------------------------------------------------------------

// rows x cols of the input for normalized_shape, or nullopt when ATen would
// reject the call (the fallback raises its error).
std::optional<std::pair<int64_t, int64_t>> layer_norm_rows(T input, at::IntArrayRef normalized_shape, OptT weight,
                                                          OptT bias) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  if (k < 1 || input.dim() < k || input.sizes().slice(input.dim() - k) != normalized_shape) return std::nullopt;
  for (OptT p : {std::cref(weight), std::cref(bias)}) {
    if (p.has_value() && p->defined() && (p->sizes() != normalized_shape || !p->is_contiguous())) return std::nullopt;
  }
  if (weight.has_value() && weight->defined() && bias.has_value() && bias->defined() &&
      weight->scalar_type() != bias->scalar_type()) {
    return std::nullopt;
  }
  // Mixed precision as ATen's CPU kernel takes it: a half-precision input with
  // float32 parameters (the statistics are then float32); other mixes fall back.
  for (OptT p : {std::cref(weight), std::cref(bias)}) {
    if (p.has_value() && p->defined() && p->scalar_type() != input.scalar_type() &&
        (p->scalar_type() != at::kFloat || input.scalar_type() == at::kFloat)) {
      return std::nullopt;
    }
  }
  const int64_t cols = c10::multiply_integers(normalized_shape);
  return std::make_pair(cols == 0 ? 0 : input.numel() / cols, cols);
}

// ATen's CPU kernel keeps mean and rstd in the input's dtype (float32 with
// float32 parameters of a half-precision input); its shape is the input's
// with the normalized dimensions set to 1.
std::vector<int64_t> stats_shape(T input, int64_t k) {
  std::vector<int64_t> shape = input.sizes().vec();
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) shape[d] = 1;
  return shape;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(T input, at::IntArrayRef normalized_shape, OptT weight,
                                                          OptT bias, double eps) {
  const kpdrKernelTable& kernels = runtime_kernels();
  const at::Tensor& w = weight.has_value() ? *weight : at::Tensor();
  const at::Tensor& b = bias.has_value() ? *bias : at::Tensor();
  if (kernels.layer_norm != nullptr && eligible({&input, &w, &b})) {
    if (auto rc = layer_norm_rows(input, normalized_shape, weight, bias)) {
      const at::Tensor x = input.contiguous();
      at::Tensor out = at::empty(input.sizes(), input.options());
      const auto shape = stats_shape(input, static_cast<int64_t>(normalized_shape.size()));
      const bool mixed = (w.defined() && w.scalar_type() != input.scalar_type()) ||
                         (b.defined() && b.scalar_type() != input.scalar_type());
      const auto stats_options = input.options().dtype(mixed ? at::kFloat : input.scalar_type());
      at::Tensor mean = at::empty(shape, stats_options), rstd = at::empty(shape, stats_options);
      kpdrLayerNormArgs args{};
      args.dtype = *entry_dtype(input.scalar_type());
      args.stats_dtype = *entry_dtype(mean.scalar_type());
      args.weight_dtype = w.defined() ? *entry_dtype(w.scalar_type()) : b.defined() ? *entry_dtype(b.scalar_type())
                                                                                  : args.dtype;
      args.rows = rc->first;
      args.cols = rc->second;
      args.eps = static_cast<float>(eps);
      args.x = x.numel() > 0 ? x.const_data_ptr() : nullptr;
      args.x_row_stride = args.cols;
      args.weight = w.defined() && w.numel() > 0 ? w.const_data_ptr() : nullptr;
      args.bias = b.defined() && b.numel() > 0 ? b.const_data_ptr() : nullptr;
      args.out = out.numel() > 0 ? out.mutable_data_ptr() : nullptr;
      args.out_row_stride = args.cols;
      args.mean = mean.numel() > 0 ? mean.mutable_data_ptr() : nullptr;
      args.rstd = rstd.numel() > 0 ? rstd.mutable_data_ptr() : nullptr;
      c10::DeviceGuard guard(input.device());
      if (launch_kernel(kernels.layer_norm, args, current_stream(input.device().index()))) {
        return {out, mean, rstd};
      }
    }
  }
  return run_on_fallback<std::tuple<at::Tensor, at::Tensor, at::Tensor>, T, at::IntArrayRef, OptT, OptT, double>(
      kernel_key(&layer_norm), input, normalized_shape, weight, bias, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(T grad_out, T input,
                                                                   at::IntArrayRef normalized_shape, T mean, T rstd,
                                                                   OptT weight, OptT bias,
                                                                   std::array<bool, 3> output_mask) {
  const kpdrKernelTable& kernels = runtime_kernels();
  const at::Tensor& w = weight.has_value() ? *weight : at::Tensor();
  const at::Tensor& b = bias.has_value() ? *bias : at::Tensor();
  if (kernels.layer_norm != nullptr && eligible({&grad_out, &input, &mean, &rstd, &w, &b}) &&
      grad_out.sizes() == input.sizes() && grad_out.scalar_type() == input.scalar_type() &&
      mean.scalar_type() == rstd.scalar_type()) {
    auto rc = layer_norm_rows(input, normalized_shape, weight, bias);
    if (rc && mean.numel() == rc->first && rstd.numel() == rc->first) {
      const at::Tensor x = input.contiguous(), g = grad_out.contiguous();
      const at::Tensor m = mean.contiguous(), r = rstd.contiguous();
      const at::ScalarType wt = w.defined() ? w.scalar_type() : input.scalar_type();
      at::Tensor grad_input, grad_weight, grad_bias;
      if (output_mask[0]) grad_input = at::empty(input.sizes(), input.options());
      if (output_mask[1] && w.defined()) grad_weight = at::empty(w.sizes(), w.options());
      if (output_mask[2] && b.defined()) grad_bias = at::empty(b.sizes(), b.options());
      kpdrLayerNormArgs args{};
      args.backward = 1;
      args.dtype = *entry_dtype(input.scalar_type());
      args.weight_dtype = *entry_dtype(wt);
      args.stats_dtype = *entry_dtype(mean.scalar_type());
      args.rows = rc->first;
      args.cols = rc->second;
      auto ptr = [](const at::Tensor& t) { return t.defined() && t.numel() > 0 ? t.const_data_ptr() : nullptr; };
      auto mut = [](at::Tensor& t) { return t.defined() && t.numel() > 0 ? t.mutable_data_ptr() : nullptr; };
      args.x = ptr(x);
      args.x_row_stride = args.cols;
      args.weight = ptr(w);
      args.mean = const_cast<void*>(ptr(m));
      args.rstd = const_cast<void*>(ptr(r));
      args.grad_out = ptr(g);
      args.grad_out_row_stride = args.cols;
      args.grad_input = mut(grad_input);
      args.grad_input_row_stride = args.cols;
      args.grad_weight = mut(grad_weight);
      args.grad_bias = mut(grad_bias);
      c10::DeviceGuard guard(input.device());
      if (launch_kernel(kernels.layer_norm, args, current_stream(input.device().index()))) {
        return {grad_input, grad_weight, grad_bias};
      }
    }
  }
  return run_on_fallback<std::tuple<at::Tensor, at::Tensor, at::Tensor>, T, T, at::IntArrayRef, T, T, OptT, OptT,
                         std::array<bool, 3>>(kernel_key(&layer_norm_backward), grad_out, input,
                                              normalized_shape, mean, rstd, weight, bias, output_mask);
}

}  // namespace

void register_runtime_losses(Registrar& r) {
  const kpdrKernelTable& kernels = runtime_kernels();
  if (kernels.softmax_dim != nullptr) {
    r.impl("_softmax", TORCH_FN(Softmax<KPDR_SOFTMAX>::forward));
    r.impl("_log_softmax", TORCH_FN(Softmax<KPDR_LOG_SOFTMAX>::forward));
    r.impl("_softmax_backward_data", TORCH_FN(Softmax<KPDR_SOFTMAX>::backward));
    r.impl("_log_softmax_backward_data", TORCH_FN(Softmax<KPDR_LOG_SOFTMAX>::backward));
  }
  if (kernels.nll_loss != nullptr) {
    r.impl("nll_loss_forward", TORCH_FN(Nll<false>::forward));
    r.impl("nll_loss_backward", TORCH_FN(Nll<false>::backward));
    r.impl("nll_loss2d_forward", TORCH_FN(Nll<true>::forward));
    r.impl("nll_loss2d_backward", TORCH_FN(Nll<true>::backward));
  }
  if (kernels.layer_norm != nullptr) {
    r.impl("native_layer_norm", TORCH_FN(layer_norm));
    r.impl("native_layer_norm_backward", TORCH_FN(layer_norm_backward));
  }
}

}  // namespace kernel_pytorch::native
