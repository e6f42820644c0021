// Validation of kernel_pytorch.ops arguments and their translation into the
// kpdr kernel descriptors (csrc/runtime/kpdr.h), shared by every backend
// (CPU, my_asic, CUDA): each backend prepares a call here, then launches the
// descriptor on its own hardware.
//
// prepare_* checks shapes, dtypes and devices (raising errors that name the
// op, the problem and the fix), makes inputs whose innermost dimension is not
// contiguous contiguous, allocates the outputs with the inputs' options and
// fills the descriptor with their data pointers. The call object keeps every
// tensor the descriptor points into alive.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include "runtime/kpdr.h"

namespace kernel_pytorch::ops {

kpdrDtype kernel_dtype(const char* op, const char* name, const at::Tensor& t);

// float64 calls run the ATen reference (reference.h), validated on stand_in()s:
// float32 meta tensors of the same shapes and strides.
bool all_double(std::initializer_list<at::Tensor> ts);
at::Tensor stand_in(const at::Tensor& t);

struct RmsNormCall {
  kpdrRmsNormArgs args{};
  at::Tensor x, residual, weight, out, residual_out;
};
// residual undefined: rms_norm; defined: fused_add_rms_norm.
RmsNormCall prepare_rms_norm(const char* op, const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& weight, double eps);

struct SiluCall {
  kpdrSiluArgs args{};
  at::Tensor x, out;
};
SiluCall prepare_silu(const char* op, const at::Tensor& x, bool gated);

struct RopeCall {
  kpdrRopeArgs args{};
  at::Tensor x, cos, sin, out;
};
RopeCall prepare_rope(const char* op, const at::Tensor& x, const at::Tensor& cos,
                      const at::Tensor& sin, bool interleaved, bool inverse);

struct SoftmaxCall {
  kpdrSoftmaxArgs args{};
  at::Tensor x, out;  // out is x's layout with `dim` moved last
  int64_t dim = -1;
  at::Tensor result() const;  // out with `dim` back in place
};
SoftmaxCall prepare_softmax(const char* op, const at::Tensor& x, int64_t dim);

struct DecodeAttentionCall {
  kpdrDecodeAttentionArgs args{};
  at::Tensor q, k, v, lengths, out;
};
// lengths are checked against 1..T here: host_lengths is a CPU copy of them
// (the caller makes it, since reading device memory is backend specific).
// An undefined host_lengths skips that check (CUDA: a copy would synchronise
// the host and break graph capture; its kernel clamps the lengths instead).
DecodeAttentionCall prepare_decode_attention(const char* op, const at::Tensor& q,
                                             const at::Tensor& k_cache, const at::Tensor& v_cache,
                                             const c10::optional<at::Tensor>& lengths,
                                             const at::Tensor& host_lengths,
                                             c10::optional<double> scale);

struct PrefillAttentionCall {
  kpdrPrefillAttentionArgs args{};
  at::Tensor q, k, v, out;
};
PrefillAttentionCall prepare_prefill_attention(const char* op, const at::Tensor& q,
                                               const at::Tensor& k, const at::Tensor& v,
                                               bool causal, c10::optional<double> scale);

struct MatmulVecCall {
  kpdrMatmulVecArgs args{};
  at::Tensor w, x, out;
};
MatmulVecCall prepare_matmul_vec(const char* op, const at::Tensor& w, const at::Tensor& x);

}  // namespace kernel_pytorch::ops
