// The kernel_pytorch operator library: every schema in one place. Backends
// register kernels for these in cpu.cpp, my_asic.cpp and cuda/ (one file per
// dispatch key); fake (meta) kernels and autograd formulas are registered
// from Python (kernel_pytorch/ops/_registrations.py).
#include <torch/library.h>

TORCH_LIBRARY(kernel_pytorch, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor");
  m.def("fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)");
  m.def("silu(Tensor x) -> Tensor");
  m.def("silu_and_mul(Tensor x) -> Tensor");
  m.def("apply_rope(Tensor x, Tensor cos, Tensor sin, bool interleaved=False) -> Tensor");
  m.def("softmax(Tensor x, int dim=-1) -> Tensor");
  m.def("decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor? lengths=None, float? scale=None) -> Tensor");
  m.def("prefill_attention(Tensor q, Tensor k, Tensor v, bool causal=True, float? scale=None) -> Tensor");
  m.def("matmul_vec(Tensor w, Tensor x) -> Tensor");
  // Backward kernels, called by the autograd formulas of _registrations.py.
  // CUDA has kernels for them; other devices run the formula in ATen ops
  // (registered from Python as CompositeExplicitAutograd).
  m.def("rms_norm_backward(Tensor grad, Tensor x, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("silu_and_mul_backward(Tensor grad, Tensor x) -> Tensor");
}
