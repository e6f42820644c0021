// kernel_pytorch ops on CPU tensors: the torch-free kernel library
// (csrc/kernels), with torch's thread count.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "kernels/kernels.h"
#include "ops/op_args.h"
#include "ops/op_list.h"
#include "ops/reference.h"

#include <ATen/ATen.h>

namespace kernel_pytorch::ops {
namespace {

// The kernels' threads follow torch.set_num_threads, but run on the kernel
// library's pool rather than at::parallel_for: OpenMP's team joins every
// thread at the end of a region, so when another process holds a core one
// descheduled thread stalls the op for a scheduler time slice (a 0.7 ms sum
// over 2 threads took 5-8 ms on this 2-core machine at load 3); the pool's
// caller never waits for a worker that has not started. Inside an ATen
// parallel region the kernels run inline, as at::parallel_for would.
void torch_parallel_for(int64_t begin, int64_t end, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (at::in_parallel_region()) {
    fn(begin, end);
    return;
  }
  kp::pool_parallel_for(begin, end, grain, at::get_num_threads(), fn);
}

// Installed once, when the extension loads.
const bool g_parallel_installed = [] {
  kp::set_parallel_for(&torch_parallel_for);
  return true;
}();

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (all_double({x, weight})) return float64::rms_norm(x, weight, eps);
  auto c = prepare_rms_norm("rms_norm", x, at::Tensor(), weight, eps);
  if (c.args.rows > 0 && c.args.cols > 0) kp::rms_norm(c.args);
  return c.out;
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps) {
  if (all_double({x, residual, weight})) return float64::fused_add_rms_norm(x, residual, weight, eps);
  auto c = prepare_rms_norm("fused_add_rms_norm", x, residual, weight, eps);
  if (c.args.rows > 0 && c.args.cols > 0) kp::rms_norm(c.args);
  return {c.out, c.residual_out};
}

// silu, and silu_and_mul when gated.
at::Tensor silu_op(const at::Tensor& x, bool gated) {
  if (all_double({x})) return float64::silu(x, gated);
  auto c = prepare_silu(gated ? "silu_and_mul" : "silu", x, gated);
  if (c.args.rows > 0 && c.args.cols > 0) kp::silu(c.args);
  return c.out;
}
at::Tensor silu(const at::Tensor& x) { return silu_op(x, false); }
at::Tensor silu_and_mul(const at::Tensor& x) { return silu_op(x, true); }

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  if (all_double({x, cos, sin})) return float64::apply_rope(x, cos, sin, interleaved);
  auto c = prepare_rope("apply_rope", x, cos, sin, interleaved, false);
  if (x.numel() > 0) kp::rope(c.args);
  return c.out;
}

at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  if (all_double({x})) return float64::softmax(x, dim);
  auto c = prepare_softmax("softmax", x, dim);
  if (c.args.rows > 0 && c.args.cols > 0) kp::softmax(c.args);
  return c.result();
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, c10::optional<double> scale) {
  if (all_double({q, k, v})) {
    return float64::decode_attention(q, k, v, lengths, scale, lengths.has_value() ? *lengths : at::Tensor());
  }
  auto c = prepare_decode_attention("decode_attention", q, k, v, lengths,
                                    lengths.has_value() ? *lengths : at::Tensor(), scale);
  if (q.numel() > 0) kp::decode_attention(c.args);
  return c.out;
}

at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             c10::optional<double> scale) {
  if (all_double({q, k, v})) return float64::prefill_attention(q, k, v, causal, scale);
  auto c = prepare_prefill_attention("prefill_attention", q, k, v, causal, scale);
  if (q.numel() > 0) {
    if (k.size(2) == 0) return c.out.zero_();  // no keys: attention over nothing is 0
    kp::prefill_attention(c.args);
  }
  return c.out;
}

at::Tensor matmul_vec(const at::Tensor& w, const at::Tensor& x) {
  if (all_double({w, x})) return float64::matmul_vec(w, x);
  auto c = prepare_matmul_vec("matmul_vec", w, x);
  if (c.args.n > 0) {
    if (c.args.k == 0) return c.out.zero_();
    kp::matmul_vec(c.args);
  }
  return c.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(kernel_pytorch, CPU, m) { KP_IMPL_OPS(m); }

}  // namespace kernel_pytorch::ops
