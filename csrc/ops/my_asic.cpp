// kernel_pytorch ops on my_asic tensors: the device runtime's own kernels,
// else the CPU fallback (ops/runtime_launch.h).
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "core/core.h"
#include "ops/op_args.h"
#include "ops/op_list.h"
#include "ops/runtime_launch.h"

namespace kernel_pytorch::ops {
namespace {

// Validation runs first (errors name the op, whichever path runs), then the
// runtime's kernel, else the fallback.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  c10::DeviceGuard guard(x.device());
  auto c = prepare_rms_norm("rms_norm", x, at::Tensor(), weight, eps);
  if (c.args.rows == 0 || c.args.cols == 0 || launch(runtime_kernels().rms_norm, c.args, x)) return c.out;
  return run_fallback("kernel_pytorch::rms_norm", {x, weight, eps})[0].toTensor();
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps) {
  c10::DeviceGuard guard(x.device());
  auto c = prepare_rms_norm("fused_add_rms_norm", x, residual, weight, eps);
  if (c.args.rows == 0 || c.args.cols == 0 || launch(runtime_kernels().rms_norm, c.args, x)) {
    return {c.out, c.residual_out};
  }
  auto s = run_fallback("kernel_pytorch::fused_add_rms_norm", {x, residual, weight, eps});
  return {s[0].toTensor(), s[1].toTensor()};
}

// silu, and silu_and_mul when gated.
at::Tensor silu_op(const at::Tensor& x, bool gated) {
  c10::DeviceGuard guard(x.device());
  auto c = prepare_silu(gated ? "silu_and_mul" : "silu", x, gated);
  if (c.args.rows == 0 || c.args.cols == 0 || launch(runtime_kernels().silu, c.args, x)) return c.out;
  return run_fallback(gated ? "kernel_pytorch::silu_and_mul" : "kernel_pytorch::silu", {x})[0].toTensor();
}
at::Tensor silu(const at::Tensor& x) { return silu_op(x, false); }
at::Tensor silu_and_mul(const at::Tensor& x) { return silu_op(x, true); }

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  c10::DeviceGuard guard(x.device());
  auto c = prepare_rope("apply_rope", x, cos, sin, interleaved, false);
  if (x.numel() == 0 || launch(runtime_kernels().rope, c.args, x)) return c.out;
  return run_fallback("kernel_pytorch::apply_rope", {x, cos, sin, interleaved})[0].toTensor();
}

at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  c10::DeviceGuard guard(x.device());
  auto c = prepare_softmax("softmax", x, dim);
  if (c.args.rows == 0 || c.args.cols == 0 || launch(runtime_kernels().softmax, c.args, x)) return c.result();
  return run_fallback("kernel_pytorch::softmax", {x, dim})[0].toTensor();
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, c10::optional<double> scale) {
  c10::DeviceGuard guard(q.device());
  // The lengths are validated on the host: a copy of B integers.
  at::Tensor host_lengths;
  if (lengths.has_value() && lengths->defined() && lengths->device() == q.device()) {
    host_lengths = lengths->to(at::kCPU);
  }
  auto c = prepare_decode_attention("decode_attention", q, k, v, lengths, host_lengths, scale);
  if (q.numel() == 0 || launch(runtime_kernels().decode_attention, c.args, q)) return c.out;
  return run_fallback("kernel_pytorch::decode_attention", {q, k, v, lengths, scale})[0].toTensor();
}

at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             c10::optional<double> scale) {
  c10::DeviceGuard guard(q.device());
  auto c = prepare_prefill_attention("prefill_attention", q, k, v, causal, scale);
  if (q.numel() == 0) return c.out;
  if (k.size(2) == 0) return c.out.zero_();  // no keys: attention over nothing is 0
  if (launch(runtime_kernels().prefill_attention, c.args, q)) return c.out;
  return run_fallback("kernel_pytorch::prefill_attention", {q, k, v, causal, scale})[0].toTensor();
}

at::Tensor matmul_vec(const at::Tensor& w, const at::Tensor& x) {
  c10::DeviceGuard guard(w.device());
  auto c = prepare_matmul_vec("matmul_vec", w, x);
  if (c.args.n == 0) return c.out;
  if (c.args.k == 0) return c.out.zero_();
  if (launch(runtime_kernels().matmul_vec, c.args, w)) return c.out;
  return run_fallback("kernel_pytorch::matmul_vec", {w, x})[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(kernel_pytorch, PrivateUse1, m) { KP_IMPL_OPS(m); }

}  // namespace kernel_pytorch::ops
