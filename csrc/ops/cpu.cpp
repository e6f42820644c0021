// kernel_pytorch ops on CPU tensors: the torch-free kernel library
// (csrc/kernels), with torch's thread count.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "kernels/kernels.h"
#include "ops/op_args.h"
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

// float64 runs the ATen reference in double precision. Its arguments are
// validated by the kernels' own checks, on float32 meta stand-ins.
bool all_double(std::initializer_list<at::Tensor> ts) {
  for (const auto& t : ts) {
    if (t.defined() && t.scalar_type() != at::kDouble) return false;
  }
  return true;
}

at::Tensor stand_in(const at::Tensor& t) {
  if (!t.defined()) return t;
  const auto dtype = at::isFloatingType(t.scalar_type()) ? at::kFloat : t.scalar_type();
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta).dtype(dtype));
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (all_double({x, weight})) {
    prepare_rms_norm("rms_norm", stand_in(x), at::Tensor(), stand_in(weight), eps);
    return reference::rms_norm(x, weight, eps);
  }
  auto c = prepare_rms_norm("rms_norm", x, at::Tensor(), weight, eps);
  if (c.args.rows > 0 && c.args.cols > 0) kp::rms_norm(c.args);
  return c.out;
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps) {
  if (all_double({x, residual, weight})) {
    prepare_rms_norm("fused_add_rms_norm", stand_in(x), stand_in(residual), stand_in(weight), eps);
    at::Tensor s = x + residual;
    return {reference::rms_norm(s, weight, eps), s};
  }
  auto c = prepare_rms_norm("fused_add_rms_norm", x, residual, weight, eps);
  if (c.args.rows > 0 && c.args.cols > 0) kp::rms_norm(c.args);
  return {c.out, c.residual_out};
}

at::Tensor silu(const at::Tensor& x) {
  if (all_double({x})) return at::silu(x);
  auto c = prepare_silu("silu", x, false);
  if (c.args.cols > 0) kp::silu(c.args);
  return c.out;
}

at::Tensor silu_and_mul(const at::Tensor& x) {
  if (all_double({x})) {
    prepare_silu("silu_and_mul", stand_in(x), true);
    return reference::silu_and_mul(x);
  }
  auto c = prepare_silu("silu_and_mul", x, true);
  if (c.args.rows > 0 && c.args.cols > 0) kp::silu(c.args);
  return c.out;
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  if (all_double({x, cos, sin})) {
    prepare_rope("apply_rope", stand_in(x), stand_in(cos), stand_in(sin), interleaved, false);
    return reference::apply_rope(x, cos, sin, interleaved);
  }
  auto c = prepare_rope("apply_rope", x, cos, sin, interleaved, false);
  if (x.numel() > 0) kp::rope(c.args);
  return c.out;
}

at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  if (all_double({x})) {
    prepare_softmax("softmax", stand_in(x), dim);
    return at::softmax(x, dim);
  }
  auto c = prepare_softmax("softmax", x, dim);
  if (c.args.rows > 0 && c.args.cols > 0) kp::softmax(c.args);
  return c.result();
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, c10::optional<double> scale) {
  if (all_double({q, k, v})) {
    const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    c10::optional<at::Tensor> meta_lengths;
    if (lengths.has_value()) meta_lengths = stand_in(*lengths);
    prepare_decode_attention("decode_attention", stand_in(q), stand_in(k), stand_in(v), meta_lengths,
                             lengths.has_value() ? *lengths : at::Tensor(), s);
    return reference::decode_attention(q, k, v, lengths, s);
  }
  auto c = prepare_decode_attention("decode_attention", q, k, v, lengths,
                                    lengths.has_value() ? *lengths : at::Tensor(), scale);
  if (q.numel() > 0) kp::decode_attention(c.args);
  return c.out;
}

at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             c10::optional<double> scale) {
  if (all_double({q, k, v})) {
    const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    prepare_prefill_attention("prefill_attention", stand_in(q), stand_in(k), stand_in(v), causal, s);
    return reference::prefill_attention(q, k, v, causal, s);
  }
  auto c = prepare_prefill_attention("prefill_attention", q, k, v, causal, scale);
  if (q.numel() > 0) {
    if (k.size(2) == 0) return c.out.zero_();  // no keys: attention over nothing is 0
    kp::prefill_attention(c.args);
  }
  return c.out;
}

at::Tensor matmul_vec(const at::Tensor& w, const at::Tensor& x) {
  if (all_double({w, x})) {
    prepare_matmul_vec("matmul_vec", stand_in(w), stand_in(x));
    return at::mv(w, x);
  }
  auto c = prepare_matmul_vec("matmul_vec", w, x);
  if (c.args.n > 0) {
    if (c.args.k == 0) return c.out.zero_();
    kp::matmul_vec(c.args);
  }
  return c.out;
}

}  // namespace

TORCH_LIBRARY_IMPL(kernel_pytorch, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm);
  m.impl("silu", &silu);
  m.impl("silu_and_mul", &silu_and_mul);
  m.impl("apply_rope", &apply_rope);
  m.impl("softmax", &softmax);
  m.impl("decode_attention", &decode_attention);
  m.impl("prefill_attention", &prefill_attention);
  m.impl("matmul_vec", &matmul_vec);
}

}  // namespace kernel_pytorch::ops
