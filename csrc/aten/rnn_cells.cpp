// The fused LSTM and GRU cells for my_asic.
//
// For a PrivateUse1 input, ATen's RNN code (nn.LSTM, LSTMCell, GRU, GRUCell)
// takes the fused-cell path it takes for CUDA: _thnn_fused_lstm_cell and
// _thnn_fused_gru_cell, plus their backward kernels when grad mode is off
// during backward. Those have only CUDA/MPS kernels, so the CPU fallback
// cannot run them. These are the same cells written with ATen ops (each one
// runs natively or on the fallback), with the workspace layout of CUDA's
// kernels (aten/src/ATen/native/cuda/RNN.cu), which the backward reads:
//   LSTM workspace [B, 4H] = activated gates (i, f, g, o);
//   GRU  workspace [B, 5H] = (r, z, n, hx, hidden n-gate + its bias).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace kernel_pytorch {
namespace {

at::Tensor add_bias(at::Tensor gates, const std::optional<at::Tensor>& bias) {
  if (bias.has_value() && bias->defined()) {
    return gates + *bias;
  }
  return gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(
      input_gates.sizes() == hidden_gates.sizes() && input_gates.dim() == 2 &&
          input_gates.size(1) == 4 * cx.size(-1),
      "_thnn_fused_lstm_cell: expected input and hidden gates of shape [batch, 4 * hidden] matching cx, got ",
      input_gates.sizes(), ", ", hidden_gates.sizes(), " and cx ", cx.sizes());
  const at::Tensor gates = add_bias(add_bias(input_gates + hidden_gates, input_bias), hidden_bias);
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid();
  at::Tensor f = chunks[1].sigmoid();
  at::Tensor g = chunks[2].tanh();
  at::Tensor o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  at::Tensor workspace = at::cat({i, f, g, o}, 1);
  return {hy, cy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy,
    const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx,
    const at::Tensor& cy,
    const at::Tensor& workspace,
    bool has_bias) {
  const bool has_ghy = grad_hy.has_value() && grad_hy->defined();
  const bool has_gcy = grad_cy.has_value() && grad_cy->defined();
  if (!has_ghy && !has_gcy) {
    return {at::Tensor(), at::Tensor(), at::Tensor()};
  }
  auto w = workspace.chunk(4, 1);
  const at::Tensor& i = w[0];
  const at::Tensor& f = w[1];
  const at::Tensor& g = w[2];
  const at::Tensor& o = w[3];
  const at::Tensor tanh_cy = cy.tanh();
  // Gradient reaching the cell state: through hy = o * tanh(cy), plus grad_cy.
  at::Tensor gcell = has_ghy ? *grad_hy * o * (1 - tanh_cy * tanh_cy) : at::zeros_like(cy);
  if (has_gcy) {
    gcell = gcell + *grad_cy;
  }
  const at::Tensor gi = gcell * g * i * (1 - i);
  const at::Tensor gf = gcell * cx * f * (1 - f);
  const at::Tensor gg = gcell * i * (1 - g * g);
  const at::Tensor go = has_ghy ? *grad_hy * tanh_cy * o * (1 - o) : at::zeros_like(o);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_cx = gcell * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(
    const at::Tensor& input_gates,
    const at::Tensor& hidden_gates,
    const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias,
    const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(
      input_gates.sizes() == hidden_gates.sizes() && input_gates.dim() == 2 &&
          input_gates.size(1) == 3 * hx.size(-1),
      "_thnn_fused_gru_cell: expected input and hidden gates of shape [batch, 3 * hidden] matching hx, got ",
      input_gates.sizes(), ", ", hidden_gates.sizes(), " and hx ", hx.sizes());
  auto in = add_bias(input_gates, input_bias).chunk(3, 1);
  auto hid = add_bias(hidden_gates, hidden_bias).chunk(3, 1);
  at::Tensor r = (in[0] + hid[0]).sigmoid();
  at::Tensor z = (in[1] + hid[1]).sigmoid();
  at::Tensor n = (in[2] + r * hid[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  at::Tensor workspace = at::cat({r, z, n, hx, hid[2]}, 1);
  return {hy, workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy,
    const at::Tensor& workspace,
    bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const at::Tensor& r = w[0];
  const at::Tensor& z = w[1];
  const at::Tensor& n = w[2];
  const at::Tensor& hx = w[3];
  const at::Tensor& hidden_n = w[4];
  const at::Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor gr = gn * hidden_n * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor grad_hx = grad_hy * z;
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", &fused_lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", &fused_lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", &fused_gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", &fused_gru_cell_backward);
}

} // namespace kernel_pytorch
