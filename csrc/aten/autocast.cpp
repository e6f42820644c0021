// torch.autocast("my_asic", dtype=...): the same cast policy as CUDA's.
// Matmul-like ops run in the autocast dtype (float16 or bfloat16), ops that
// need range or precision run in float32, mixed-input ops promote; every other
// op passes through untouched.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace kernel_pytorch {
namespace {

using at::Tensor;
using at::autocast::CastPolicy;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define KP_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define KP_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define KP_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define KP_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(KP_LOWER_PRECISION)
  AT_FORALL_FP32(KP_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(KP_FP32_SET_OPT_DTYPE)
  AT_FORALL_PROMOTE(KP_PROMOTE)
#undef KP_LOWER_PRECISION
#undef KP_FP32
#undef KP_FP32_SET_OPT_DTYPE
#undef KP_PROMOTE
}

} // namespace
} // namespace kernel_pytorch
