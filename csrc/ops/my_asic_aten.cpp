// Standard PyTorch calls on my_asic tensors that the runtime's kernels serve,
// so unmodified models use them: F.scaled_dot_product_attention (through
// PyTorch's overrideable fused-attention backend, chosen by _fused_sdp_choice),
// F.rms_norm (through aten::_fused_rms_norm), F.silu and torch.softmax. Cases the kernels do not cover (attention masks,
// dropout, other dtypes, a runtime without the kernel) take PyTorch's usual
// path: the math decomposition or the CPU fallback.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "aten/aten.h"
#include "core/core.h"
#include "ops/op_args.h"
#include "ops/reference.h"
#include "ops/runtime_launch.h"

namespace kernel_pytorch::ops {
namespace {

bool kernel_dtype_ok(const at::Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kBFloat16 || s == at::kHalf;
}

int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const c10::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         c10::optional<double> scale, bool enable_gqa) {
  // A call that needs a gradient: the runtime's kernels have no backward, so
  // on host-addressable memory ATen's CPU flash attention pair serves it
  // (aten/native/attention.cpp), under ATen's own CPU constraints.
  // Inside an Inductor graph on host memory, prefill without a gradient too
  // (aten.h: prefer_host_flash_attention); decode (one query) keeps the
  // runtime's split-K kernel, which beats ATen's on many cores (docs/kernels.md).
  const bool needs_grad = at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  const auto q_len = q.dim() == 4 ? q.sym_size(2).maybe_as_int() : std::nullopt;
  const bool host_prefill = native::prefer_host_flash_attention() && q_len.has_value() && *q_len > 1;
  if ((needs_grad || host_prefill) && native::host_flash_attention()) {
    const int64_t cpu_choice =
        at::native::_fused_sdp_choice_cpp(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
    if (cpu_choice == static_cast<int64_t>(at::SDPBackend::flash_attention)) {
      return cpu_choice;
    }
  }
  const auto& kernels = runtime_kernels();
  const bool ok =
      kernels.prefill_attention != nullptr && kernels.decode_attention != nullptr &&
      !(attn_mask.has_value() && attn_mask->defined()) && dropout_p == 0.0 && q.dim() == 4 &&
      k.dim() == 4 && v.dim() == 4 && kernel_dtype_ok(q) && k.scalar_type() == q.scalar_type() &&
      v.scalar_type() == q.scalar_type() && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
      q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0 &&
      (q.size(1) == k.size(1) || enable_gqa) &&
      // PyTorch's is_causal masks top-left aligned; ours agrees when the lengths do.
      (!is_causal || q.size(2) == k.size(2)) && k.size(2) > 0;
  return static_cast<int64_t>(ok ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

double sdpa_scale(const at::Tensor& q, c10::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// Points a prepared kernel call's output at `out` (whose innermost dimension
// must be contiguous; the descriptors carry the other strides).
template <typename Call, size_t N>
void write_into(Call& c, const at::Tensor& out, int64_t (&out_stride)[N]) {
  c.out = out;
  c.args.out = out.data_ptr();
  for (size_t i = 0; i < N; ++i) out_stride[i] = out.stride(static_cast<int64_t>(i));
}

// Returns exactly what PyTorch's meta function of this op predicts
// (torch/_meta_registrations.py), since compiled graphs are traced with it: an
// output laid out like the query (empty_like: HF models pass q as a transposed
// view and drop a later .contiguous() the fake tensor says is a no-op), a
// float32 logsumexp [B, H, Sq], no cum_seq / debug tensors, and scalar
// seed/offset tensors. Every output is a distinct tensor (none alias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
sdpa_overrideable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const c10::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                  bool return_debug_mask, c10::optional<double> scale) {
  check_same_device("aten::_scaled_dot_product_fused_attention_overrideable",
                    {{"query", &q}, {"key", &k}, {"value", &v}, {"attn_bias", attn_bias ? &*attn_bias : nullptr}});
  TORCH_CHECK(!(attn_bias.has_value() && attn_bias->defined()) && dropout_p == 0.0,
              "my_asic: the fused attention kernels take no attention mask and no dropout; "
              "_fused_sdp_choice routes those calls to the math implementation");
  c10::DeviceGuard guard(q.device());
  const double s = sdpa_scale(q, scale);
  at::Tensor out = at::empty_like(q);  // v's head_dim is q's (_fused_sdp_choice checks it)
  const bool inner_contiguous = out.size(3) <= 1 || out.stride(3) == 1;
  bool done = q.numel() == 0;
  if (!done && q.size(2) == 1 && !is_causal) {
    auto c = prepare_decode_attention("scaled_dot_product_attention", q.select(2, 0), k, v,
                                      c10::nullopt, at::Tensor(), s);
    if (inner_contiguous) write_into(c, out.select(2, 0), c.args.out_stride);
    done = launch(runtime_kernels().decode_attention, c.args, q);
    if (done && !inner_contiguous) out.select(2, 0).copy_(c.out);
  } else if (!done) {
    auto c = prepare_prefill_attention("scaled_dot_product_attention", q, k, v, is_causal, s);
    if (inner_contiguous) write_into(c, out, c.args.out_stride);
    done = launch(runtime_kernels().prefill_attention, c.args, q);
    if (done && !inner_contiguous) out.copy_(c.out);
  }
  if (!done) {  // the runtime declined this dtype: PyTorch's math implementation
    const int64_t group = q.size(1) / k.size(1);
    out.copy_(std::get<0>(at::_scaled_dot_product_attention_math(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), c10::nullopt, 0.0, is_causal,
        c10::nullopt, s)));
  }
  // The kernels keep no logsumexp (the backward recomputes the probabilities):
  // NaN says so to anyone who reads it.
  const auto logsumexp = at::full({q.size(0), q.size(1), q.size(2)}, std::numeric_limits<float>::quiet_NaN(),
                                  q.options().dtype(at::kFloat));
  const auto seed_options = q.options().dtype(at::kLong);
  return {out, logsumexp, at::Tensor(), at::Tensor(), q.size(2), k.size(2),
          at::zeros({}, seed_options), at::zeros({}, seed_options), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sdpa_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
    c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, c10::optional<double> scale) {
  c10::DeviceGuard guard(q.device());
  auto [dq, dk, dv] = reference::attention_backward(grad_out, q, k, v, is_causal, sdpa_scale(q, scale));
  // The meta function predicts gradients laid out like their inputs.
  auto like = [](const at::Tensor& grad, const at::Tensor& input) {
    if (input.is_non_overlapping_and_dense() && grad.strides() == input.strides()) return grad;
    at::Tensor out = at::empty_like(input);
    return out.strides() == grad.strides() ? grad : out.copy_(grad);
  };
  return {like(dq, q), like(dk, k), like(dv, v), at::Tensor()};
}

at::Tensor silu(const at::Tensor& x) {
  if (kernel_dtype_ok(x)) {
    c10::DeviceGuard guard(x.device());
    auto c = prepare_silu("silu", x, false);
    if (c.args.cols == 0 || launch(runtime_kernels().silu, c.args, x)) return c.out;
  }
  return run_fallback("aten::silu", {x})[0].toTensor();
}

at::Tensor softmax(const at::Tensor& x, int64_t dim, bool half_to_float) {
  if (kernel_dtype_ok(x) && !half_to_float) {
    c10::DeviceGuard guard(x.device());
    auto c = prepare_softmax("softmax", x, dim);
    if (c.args.rows == 0 || c.args.cols == 0 || launch(runtime_kernels().softmax, c.args, x)) {
      return c.result().contiguous();
    }
  }
  return run_fallback("aten::_softmax", {x, dim, half_to_float})[0].toTensor();
}

// F.rms_norm's fused form: (out, rstd) with rstd float32 of shape
// input.shape[:-1] + [1]; the backward (aten::_fused_rms_norm_backward) runs
// through the fallback from that rstd.
std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                                  const c10::optional<at::Tensor>& weight,
                                                  c10::optional<double> eps) {
  check_same_device("aten::_fused_rms_norm", {{"input", &x}, {"weight", weight ? &*weight : nullptr}});
  const bool served = normalized_shape.size() == 1 && x.dim() >= 1 && weight.has_value() &&
                      weight->defined() && kernel_dtype_ok(x) && weight->scalar_type() == x.scalar_type();
  if (served) {
    c10::DeviceGuard guard(x.device());
    // F.rms_norm's default eps is the dtype's machine epsilon.
    double e = 1.1920928955078125e-07;
    if (eps.has_value()) e = *eps;
    else if (x.scalar_type() == at::kHalf) e = 0.0009765625;
    else if (x.scalar_type() == at::kBFloat16) e = 0.0078125;
    auto c = prepare_rms_norm("rms_norm", x, at::Tensor(), *weight, e);
    auto rstd_shape = x.sizes().vec();
    rstd_shape.back() = 1;
    at::Tensor rstd = at::empty(rstd_shape, x.options().dtype(at::kFloat));
    c.args.rstd = rstd.data_ptr();
    if (c.args.rows == 0 || c.args.cols == 0 || launch(runtime_kernels().rms_norm, c.args, x)) {
      return {c.out, rstd};
    }
  }
  auto s = run_fallback("aten::_fused_rms_norm", {x, normalized_shape, weight, eps});
  return {s[0].toTensor(), s[1].toTensor()};
}

// The backward of F.rms_norm's fused form from the forward's rstd (PyTorch
// has no CPU kernel of it for the fallback to run), in ATen operations.
std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                           at::IntArrayRef normalized_shape,
                                                           const at::Tensor& rstd,
                                                           const c10::optional<at::Tensor>& weight,
                                                           std::array<bool, 2> output_mask) {
  check_same_device("aten::_fused_rms_norm_backward",
                    {{"grad_out", &grad_out}, {"input", &x}, {"rstd", &rstd}, {"weight", weight ? &*weight : nullptr}});
  c10::DeviceGuard guard(x.device());
  const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const int64_t n = static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> dims(n);
  for (int64_t i = 0; i < n; ++i) dims[i] = x.dim() - n + i;
  const at::Tensor xhat = x.to(acc) * rstd.to(acc);
  const at::Tensor g = grad_out.to(acc);
  const bool has_weight = weight.has_value() && weight->defined();
  const at::Tensor gw = has_weight ? g * weight->to(acc) : g;
  at::Tensor dx, dw;
  if (output_mask[0]) {
    dx = (rstd.to(acc) * (gw - xhat * (gw * xhat).mean(dims, /*keepdim=*/true))).to(x.scalar_type());
  }
  if (output_mask[1] && has_weight) {
    std::vector<int64_t> lead(x.dim() - n);
    for (int64_t i = 0; i < x.dim() - n; ++i) lead[i] = i;
    dw = (lead.empty() ? g * xhat : (g * xhat).sum(lead)).to(weight->scalar_type());
  }
  return {dx, dw};
}

}  // namespace

}  // namespace kernel_pytorch::ops

namespace at::native {
// at::scaled_dot_product_attention asks the DispatchStub, not the op.
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &kernel_pytorch::ops::fused_sdp_choice)
}  // namespace at::native

namespace kernel_pytorch::ops {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_rms_norm", &fused_rms_norm);
  m.impl("_fused_rms_norm_backward", &fused_rms_norm_backward);
  m.impl("_fused_sdp_choice", &fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", &sdpa_overrideable);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", &sdpa_overrideable_backward);
  m.impl("silu", &silu);
  m.impl("_softmax", &softmax);
}

}  // namespace kernel_pytorch::ops
