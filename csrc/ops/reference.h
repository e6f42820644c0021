// The ops written with ATen operations: float64 on CPU runs these (the
// kernel library computes in float32, too coarse for double-precision users
// and gradcheck). Arguments are validated by the caller.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

namespace kernel_pytorch::ops::reference {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor silu_and_mul(const at::Tensor& x);
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved);
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, double scale);
at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             double scale);

}  // namespace kernel_pytorch::ops::reference

namespace kernel_pytorch::ops::reference {

// Gradients of softmax(q k^T * scale + causal mask) v with respect to q, k, v
// (kv heads shared by groups of query heads; causal mask bottom-right
// aligned), computed in float32 (float64 for float64) from a recomputed
// probability matrix.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    bool causal, double scale);

}  // namespace kernel_pytorch::ops::reference

namespace kernel_pytorch::ops::reference {

// Backward of rms_norm (dx, dweight) and of silu_and_mul (dx), computed in
// float32 (float64 for float64) and returned in the inputs' dtypes.
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                     const at::Tensor& weight, double eps);
at::Tensor silu_and_mul_backward(const at::Tensor& grad, const at::Tensor& x);

}  // namespace kernel_pytorch::ops::reference

// float64 calls on CPU and CUDA (the kernels compute in float32): validated on
// float32 meta stand-ins (op_args.h), computed by the references above.
namespace kernel_pytorch::ops::float64 {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps);
at::Tensor silu(const at::Tensor& x, bool gated);
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved);
at::Tensor softmax(const at::Tensor& x, int64_t dim);
// host_lengths as for prepare_decode_attention (undefined: values not checked).
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& lengths, c10::optional<double> scale,
                            const at::Tensor& host_lengths);
at::Tensor prefill_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             c10::optional<double> scale);
at::Tensor matmul_vec(const at::Tensor& w, const at::Tensor& x);

}  // namespace kernel_pytorch::ops::float64
