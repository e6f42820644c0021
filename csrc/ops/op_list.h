// The kernel_pytorch ops every backend implements, listed once (their
// schemas are in schemas.cpp). A backend defines a function of each name in
// scope and registers them all for its dispatch key:
//   TORCH_LIBRARY_IMPL(kernel_pytorch, CPU, m) { KP_IMPL_OPS(m); }
#pragma once

#define KP_OPS(X, m) \
  X(m, rms_norm) X(m, fused_add_rms_norm) X(m, silu) X(m, silu_and_mul) X(m, apply_rope) X(m, softmax) \
  X(m, decode_attention) X(m, prefill_attention) X(m, matmul_vec)

#define KP_IMPL_OP(m, name) m.impl(#name, &name);
#define KP_IMPL_OPS(m) KP_OPS(KP_IMPL_OP, m)
