// kernel_pytorch ops on CUDA tensors: the CUDA kernel library
// (csrc/kernels/cuda), launched on the current stream with the launch
// configuration the tuner chose. Nothing here synchronises the host (except
// the one-time tuning of a new shape), so the ops work inside CUDA graphs.
//
// float64 runs the ATen reference (csrc/ops/reference.cpp), as on the CPU;
// prefill_attention calls PyTorch's scaled_dot_product_attention
// (FlashAttention-2 / cuDNN / memory-efficient kernels).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/kernels_cuda.h"
#include "ops/cuda/tuner.h"
#include "ops/op_args.h"
#include "ops/op_list.h"
#include "ops/reference.h"

namespace kernel_pytorch::ops {
namespace {

using kp::cuda::LaunchConfig;

void check_launch(cudaError_t err, const char* op) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky launch error so the device stays usable
  TORCH_CHECK(err != cudaErrorNoKernelImageForDevice && err != cudaErrorInvalidDeviceFunction,
              "kernel_pytorch.ops.", op, ": this build has no CUDA kernels for this GPU (built for ",
              kp::cuda::built_archs(), "); reinstall with TORCH_CUDA_ARCH_LIST set to its compute "
              "capability (e.g. TORCH_CUDA_ARCH_LIST=\"9.0\")");
  TORCH_CHECK(false, "kernel_pytorch.ops.", op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

const char* dtype_name(kpdrDtype d) {
  switch (d) {
    case KPDR_DTYPE_FLOAT16: return "float16";
    case KPDR_DTYPE_BFLOAT16: return "bfloat16";
    default: return "float32";
  }
}

// Shape buckets of the tuning keys: powers of two for the sizes that only
// change how much work there is, exact values for the ones that shape a row.
int64_t bucket(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Launches `kernel` on the current stream with the configuration the tuner
// chose for (op, dtype, shape) among `cands`.
template <typename Args, typename Kernel>
void launch_tuned(const char* op, const Args& args, const std::string& shape, const kp::cuda::ConfigList& cands,
                  Kernel kernel) {
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const LaunchConfig cfg = cuda::choose_config(
      op, dtype_name(args.dtype), shape, cands, [&](LaunchConfig cfg, cudaStream_t s) { return kernel(args, cfg, s); },
      stream);
  check_launch(kernel(args, cfg, stream), op);
}

// rms_norm (residual undefined) and fused_add_rms_norm.
RmsNormCall rms_norm_op(const char* op, const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                        double eps) {
  c10::cuda::CUDAGuard guard(x.device());
  auto c = prepare_rms_norm(op, x, residual, weight, eps);
  if (c.args.rows > 0 && c.args.cols > 0) {
    const std::string shape = "rows<=" + std::to_string(bucket(c.args.rows)) + ",cols=" + std::to_string(c.args.cols);
    launch_tuned(op, c.args, shape, kp::cuda::rms_norm_candidates(c.args), kp::cuda::rms_norm);
  }
  return c;
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (all_double({x, weight})) return float64::rms_norm(x, weight, eps);
  return rms_norm_op("rms_norm", x, at::Tensor(), weight, eps).out;
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps) {
  if (all_double({x, residual, weight})) return float64::fused_add_rms_norm(x, residual, weight, eps);
  auto c = rms_norm_op("fused_add_rms_norm", x, residual, weight, eps);
  return {c.out, c.residual_out};
}

at::Tensor silu_op(const at::Tensor& x, bool gated) {
  const char* op = gated ? "silu_and_mul" : "silu";
  if (all_double({x})) return float64::silu(x, gated);
  c10::cuda::CUDAGuard guard(x.device());
  auto c = prepare_silu(op, x, gated);
  if (c.args.rows > 0 && c.args.cols > 0) {
    const std::string shape = "elements<=" + std::to_string(bucket(c.args.rows * c.args.cols)) +
                              ",cols<=" + std::to_string(bucket(c.args.cols));
    launch_tuned(op, c.args, shape, kp::cuda::silu_candidates(c.args), kp::cuda::silu);
  }
  return c.out;
}

at::Tensor silu(const at::Tensor& x) { return silu_op(x, false); }
at::Tensor silu_and_mul(const at::Tensor& x) { return silu_op(x, true); }

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  if (all_double({x, cos, sin})) return float64::apply_rope(x, cos, sin, interleaved);
  c10::cuda::CUDAGuard guard(x.device());
  auto c = prepare_rope("apply_rope", x, cos, sin, interleaved, false);
  if (x.numel() > 0) {
    const std::string shape = "tokens<=" + std::to_string(bucket(c.args.batch * c.args.seq)) + ",heads=" +
                              std::to_string(c.args.heads) + ",head_dim=" + std::to_string(c.args.head_dim) +
                              ",interleaved=" + std::to_string(c.args.interleaved);
    launch_tuned("apply_rope", c.args, shape, kp::cuda::rope_candidates(c.args), kp::cuda::rope);
  }
  return c.out;
}

at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  if (all_double({x})) return float64::softmax(x, dim);
  c10::cuda::CUDAGuard guard(x.device());
  auto c = prepare_softmax("softmax", x, dim);
  if (c.args.rows > 0 && c.args.cols > 0) {
    const std::string shape = "rows<=" + std::to_string(bucket(c.args.rows)) + ",cols=" + std::to_string(c.args.cols);
    launch_tuned("softmax", c.args, shape, kp::cuda::softmax_candidates(c.args), kp::cuda::softmax);
  }
  return c.result();
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, c10::optional<double> scale) {
  if (all_double({q, k, v})) return float64::decode_attention(q, k, v, lengths, scale, at::Tensor());
  c10::cuda::CUDAGuard guard(q.device());
  // The lengths are not range-checked on the host here: that would copy them
  // and synchronise. The kernel clamps them to the cache length.
  auto c = prepare_decode_attention("decode_attention", q, k, v, lengths, at::Tensor(), scale);
  if (q.numel() == 0) return c.out;
  if (!kp::cuda::decode_attention_supported(c.args)) {
    // head_dim beyond the kernel's register budget: ATen ops, in float32.
    return reference::decode_attention(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat), lengths, c.args.scale)
        .to(q.scalar_type());
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const auto& a = c.args;
  const auto candidates = kp::cuda::decode_attention_candidates(a);
  // The tuner times the candidates from CUDA graphs, which must not allocate
  // while they are captured: one workspace, large enough for every
  // candidate, allocated at the first (eager) launch and kept until tuning
  // is done.
  at::Tensor tuning_ws;
  auto tuning_launch = [&](LaunchConfig cfg, cudaStream_t s) {
    if (!tuning_ws.defined()) {
      size_t bytes = 0;
      for (int i = 0; i < candidates.size; ++i) {
        bytes = std::max(bytes, kp::cuda::decode_attention_workspace_bytes(a, candidates.items[i]));
      }
      tuning_ws = at::empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, q.options().dtype(at::kByte));
    }
    return kp::cuda::decode_attention(a, cfg, tuning_ws.data_ptr(), s);
  };
  const std::string shape = "batch=" + std::to_string(a.batch) + ",heads=" + std::to_string(a.heads) +
                            ",kv_heads=" + std::to_string(a.kv_heads) + ",head_dim=" + std::to_string(a.head_dim) +
                            ",T<=" + std::to_string(bucket(a.cache_len));
  const auto cfg = cuda::choose_config("decode_attention", dtype_name(a.dtype), shape, candidates, tuning_launch, stream);
  const size_t bytes = kp::cuda::decode_attention_workspace_bytes(a, cfg);
  at::Tensor ws;
  if (bytes > 0) ws = at::empty({static_cast<int64_t>(bytes)}, q.options().dtype(at::kByte));
  check_launch(kp::cuda::decode_attention(a, cfg, bytes > 0 ? ws.data_ptr() : nullptr, stream), "decode_attention");
  return c.out;
}

// FlashAttention-2 / cuDNN through SDPA. Our causal mask is bottom-right
// aligned (query i sees keys j <= i + S - T); SDPA's is_causal is top-left, so
// T > S drops the leading queries (they see no key: output 0) and T < S uses
// an explicit mask.
at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             c10::optional<double> scale) {
  if (all_double({q, k, v})) return float64::prefill_attention(q, k, v, causal, scale);
  c10::cuda::CUDAGuard guard(q.device());
  // Validation (and the output's allocation for the degenerate cases).
  auto c = prepare_prefill_attention("prefill_attention", q, k, v, causal, scale);
  const int64_t T = q.size(2), S = k.size(2);
  if (q.numel() == 0) return c.out;
  if (S == 0) return c.out.zero_();
  const double s = c.args.scale;
  const bool gqa = q.size(1) != k.size(1);
  if (!causal || T == S) {
    return at::scaled_dot_product_attention(q, k, v, c10::nullopt, 0.0, causal, s, gqa).contiguous();
  }
  if (T > S) {
    c.out.narrow(2, 0, T - S).zero_();
    c.out.narrow(2, T - S, S).copy_(
        at::scaled_dot_product_attention(q.narrow(2, T - S, S), k, v, c10::nullopt, 0.0, true, s, gqa));
    return c.out;
  }
  const auto mask = at::ones({T, S}, q.options().dtype(at::kBool)).tril(S - T);
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, s, gqa).contiguous();
}

at::Tensor matmul_vec(const at::Tensor& w, const at::Tensor& x) {
  if (all_double({w, x})) return float64::matmul_vec(w, x);
  c10::cuda::CUDAGuard guard(w.device());
  auto c = prepare_matmul_vec("matmul_vec", w, x);
  if (c.args.n > 0) {
    if (c.args.k == 0) return c.out.zero_();
    const std::string shape = "n<=" + std::to_string(bucket(c.args.n)) + ",k=" + std::to_string(c.args.k);
    launch_tuned("matmul_vec", c.args, shape, kp::cuda::matmul_vec_candidates(c.args), kp::cuda::matmul_vec);
  }
  return c.out;
}

// ------------------------------------------------------------------ backward

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                     const at::Tensor& weight, double eps) {
  TORCH_CHECK(grad.sizes() == x.sizes(), "kernel_pytorch.ops.rms_norm_backward: grad must have x's shape ",
              x.sizes(), ", got ", grad.sizes());
  prepare_rms_norm("rms_norm_backward", stand_in(x), at::Tensor(), stand_in(weight), eps);
  TORCH_CHECK(grad.scalar_type() == x.scalar_type() && grad.device() == x.device() && weight.device() == x.device(),
              "kernel_pytorch.ops.rms_norm_backward: grad, x and weight must share x's dtype and device");
  c10::cuda::CUDAGuard guard(x.device());
  if (x.scalar_type() == at::kDouble || x.numel() == 0) return reference::rms_norm_backward(grad, x, weight, eps);
  const at::Tensor xc = x.contiguous(), gc = grad.contiguous(), wc = weight.contiguous();
  at::Tensor dx = at::empty(x.sizes(), x.options());
  kp::cuda::RmsNormBackwardArgs a{};
  a.dtype = kernel_dtype("rms_norm_backward", "x", x);
  a.cols = x.size(-1);
  a.rows = x.numel() / a.cols;
  a.grad = gc.data_ptr();
  a.x = xc.data_ptr();
  a.weight = wc.data_ptr();
  a.dx = dx.data_ptr();
  a.eps = static_cast<float>(eps);
  at::Tensor partial = at::empty({kp::cuda::rms_norm_backward_blocks(a), a.cols}, x.options().dtype(at::kFloat));
  a.dw_partial = partial.data_ptr<float>();
  check_launch(kp::cuda::rms_norm_backward(a, c10::cuda::getCurrentCUDAStream()), "rms_norm_backward");
  return {dx, partial.sum(0).to(weight.scalar_type())};
}

at::Tensor silu_and_mul_backward(const at::Tensor& grad, const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0 && grad.dim() == x.dim() &&
                  grad.size(-1) * 2 == x.size(-1) && grad.numel() * 2 == x.numel(),
              "kernel_pytorch.ops.silu_and_mul_backward: grad must be x's shape with the last dimension "
              "halved; got grad ", grad.sizes(), " and x ", x.sizes());
  TORCH_CHECK(grad.scalar_type() == x.scalar_type() && grad.device() == x.device(),
              "kernel_pytorch.ops.silu_and_mul_backward: grad and x must share dtype and device");
  c10::cuda::CUDAGuard guard(x.device());
  if (x.scalar_type() == at::kDouble || x.numel() == 0) return reference::silu_and_mul_backward(grad, x);
  const at::Tensor xc = x.contiguous(), gc = grad.contiguous();
  at::Tensor dx = at::empty(x.sizes(), x.options());
  kp::cuda::SiluAndMulBackwardArgs a{};
  a.dtype = kernel_dtype("silu_and_mul_backward", "x", x);
  a.cols = x.size(-1) / 2;
  a.rows = x.numel() / x.size(-1);
  a.grad = gc.data_ptr();
  a.x = xc.data_ptr();
  a.dx = dx.data_ptr();
  check_launch(kp::cuda::silu_and_mul_backward(a, c10::cuda::getCurrentCUDAStream()), "silu_and_mul_backward");
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(kernel_pytorch, CUDA, m) {
  KP_IMPL_OPS(m);
  m.impl("rms_norm_backward", &rms_norm_backward);
  m.impl("silu_and_mul_backward", &silu_and_mul_backward);
}

}  // namespace kernel_pytorch::ops
