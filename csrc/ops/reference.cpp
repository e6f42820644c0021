#include "ops/reference.h"

#include <ATen/ATen.h>

#include <cmath>

#include "ops/op_args.h"

namespace kernel_pytorch::ops::reference {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

at::Tensor silu_and_mul(const at::Tensor& x) {
  const int64_t d = x.size(-1) / 2;
  return at::silu(x.narrow(-1, 0, d)) * x.narrow(-1, d, d);
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  // cos, sin: [S, D/2] or [B, S, D/2] -> broadcast over heads.
  const at::Tensor c = cos.unsqueeze(-2).to(x.scalar_type());
  const at::Tensor s = sin.unsqueeze(-2).to(x.scalar_type());
  const int64_t half = x.size(-1) / 2;
  if (interleaved) {
    const at::Tensor pairs = x.unflatten(-1, {half, 2});
    const at::Tensor x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
    return at::stack({x0 * c - x1 * s, x1 * c + x0 * s}, -1).flatten(-2);
  }
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

namespace {

// softmax(q k^T * scale + mask) v with kv heads repeated for grouped queries.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                  double scale) {
  const int64_t group = q.size(1) / k.size(1);
  const at::Tensor kk = k.repeat_interleave(group, 1), vv = v.repeat_interleave(group, 1);
  at::Tensor scores = at::matmul(q, kk.transpose(-2, -1)) * scale;
  if (mask.defined()) scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  // Rows with every key masked give 0, as the kernels do.
  return at::nan_to_num(at::softmax(scores, -1), 0.0).matmul(vv);
}

}  // namespace

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, double scale) {
  at::Tensor mask;
  if (lengths.has_value() && lengths->defined()) {
    const at::Tensor pos = at::arange(k.size(2), lengths->options().dtype(at::kLong));
    mask = (pos.unsqueeze(0) < lengths->to(at::kLong).unsqueeze(1)).view({q.size(0), 1, 1, k.size(2)});
  }
  return attend(q.unsqueeze(2), k, v, mask, scale).squeeze(2);
}

at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             double scale) {
  at::Tensor mask;
  if (causal) {
    const int64_t tq = q.size(2), tk = k.size(2);
    // Bottom-right aligned: query i sees keys j <= i + (tk - tq).
    mask = at::ones({tq, tk}, q.options().dtype(at::kBool)).tril(tk - tq);
  }
  return attend(q, k, v, mask, scale);
}

}  // namespace kernel_pytorch::ops::reference

namespace kernel_pytorch::ops::reference {

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    bool causal, double scale) {
  const auto acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const int64_t group = q.size(1) / k.size(1);
  const at::Tensor qf = q.to(acc), g = grad_out.to(acc);
  const at::Tensor kf = k.to(acc).repeat_interleave(group, 1), vf = v.to(acc).repeat_interleave(group, 1);
  at::Tensor scores = at::matmul(qf, kf.transpose(-2, -1)) * scale;
  if (causal) {
    const int64_t tq = q.size(2), tk = k.size(2);
    const at::Tensor mask = at::ones({tq, tk}, q.options().dtype(at::kBool)).tril(tk - tq);
    scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  }
  const at::Tensor p = at::nan_to_num(at::softmax(scores, -1), 0.0);
  const at::Tensor dv = at::matmul(p.transpose(-2, -1), g);
  const at::Tensor dp = at::matmul(g, vf.transpose(-2, -1));
  const at::Tensor ds = p * (dp - (dp * p).sum(-1, /*keepdim=*/true)) * scale;
  const at::Tensor dq = at::matmul(ds, kf);
  const at::Tensor dk = at::matmul(ds.transpose(-2, -1), qf);
  // Sum the gradients of the query heads that share each kv head.
  auto fold = [&](const at::Tensor& t) {
    return t.unflatten(1, {k.size(1), group}).sum(2);
  };
  return {dq.to(q.scalar_type()), fold(dk).to(k.scalar_type()), fold(dv).to(v.scalar_type())};
}

}  // namespace kernel_pytorch::ops::reference

namespace kernel_pytorch::ops::reference {

namespace {
at::ScalarType accumulation_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}
}  // namespace

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                     const at::Tensor& weight, double eps) {
  const auto acc = accumulation_type(x);
  const at::Tensor xf = x.to(acc), gf = grad.to(acc), wf = weight.to(acc);
  const at::Tensor inv = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  const at::Tensor gw = gf * wf;
  const at::Tensor dx = inv * (gw - xf * inv.pow(2) * (gw * xf).mean(-1, /*keepdim=*/true));
  const at::Tensor dw = (gf * xf * inv).reshape({-1, x.size(-1)}).sum(0);
  return {dx.to(x.scalar_type()), dw.to(weight.scalar_type())};
}

at::Tensor silu_and_mul_backward(const at::Tensor& grad, const at::Tensor& x) {
  const auto acc = accumulation_type(x);
  const int64_t d = x.size(-1) / 2;
  const at::Tensor gate = x.narrow(-1, 0, d).to(acc), up = x.narrow(-1, d, d).to(acc), g = grad.to(acc);
  const at::Tensor sig = at::sigmoid(gate);
  return at::cat({g * up * sig * (1 + gate * (1 - sig)), g * gate * sig}, -1).to(x.scalar_type());
}

}  // namespace kernel_pytorch::ops::reference

namespace kernel_pytorch::ops::float64 {
namespace {
double scale_or_default(c10::optional<double> scale, const at::Tensor& q) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}
}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  prepare_rms_norm("rms_norm", stand_in(x), at::Tensor(), stand_in(weight), eps);
  return reference::rms_norm(x, weight, eps);
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps) {
  prepare_rms_norm("fused_add_rms_norm", stand_in(x), stand_in(residual), stand_in(weight), eps);
  at::Tensor s = x + residual;
  return {reference::rms_norm(s, weight, eps), s};
}

at::Tensor silu(const at::Tensor& x, bool gated) {
  prepare_silu(gated ? "silu_and_mul" : "silu", stand_in(x), gated);
  return gated ? reference::silu_and_mul(x) : at::silu(x);
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  prepare_rope("apply_rope", stand_in(x), stand_in(cos), stand_in(sin), interleaved, false);
  return reference::apply_rope(x, cos, sin, interleaved);
}

at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  prepare_softmax("softmax", stand_in(x), dim);
  return at::softmax(x, dim);
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, c10::optional<double> scale,
                            const at::Tensor& host_lengths) {
  c10::optional<at::Tensor> meta_lengths;
  if (lengths.has_value() && lengths->defined()) meta_lengths = stand_in(*lengths);
  const double s = scale_or_default(scale, q);
  prepare_decode_attention("decode_attention", stand_in(q), stand_in(k), stand_in(v), meta_lengths, host_lengths, s);
  return reference::decode_attention(q, k, v, lengths, s);
}

at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             c10::optional<double> scale) {
  const double s = scale_or_default(scale, q);
  prepare_prefill_attention("prefill_attention", stand_in(q), stand_in(k), stand_in(v), causal, s);
  return reference::prefill_attention(q, k, v, causal, s);
}

at::Tensor matmul_vec(const at::Tensor& w, const at::Tensor& x) {
  prepare_matmul_vec("matmul_vec", stand_in(w), stand_in(x));
  return at::mv(w, x);
}

}  // namespace kernel_pytorch::ops::float64
