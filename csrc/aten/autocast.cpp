// torch.autocast("my_asic", dtype=...): the same cast policy as CUDA's
// (aten/src/ATen/autocast_mode.cpp, less its cuDNN-only entries).
// Matmul-like ops run in the autocast dtype (float16 or bfloat16), ops that
// need range or precision run in float32 (norm with an appended dtype),
// mixed-input ops promote, binary_cross_entropy is refused; every other op
// passes through untouched.
#include <ATen/autocast_mode.h>
#include <torch/library.h>
#include <torch/version.h>

namespace kernel_pytorch {
namespace {

#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
using at::DimnameList;  // named unqualified by autocast_mode.h's macros before torch 2.13
#endif
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
using at::autocast::CastPolicy;

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// As CUDA: binary_cross_entropy is unsafe in reduced precision (a sigmoid
// before it underflows), so autocast refuses it rather than running it.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
      "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
      "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
      "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
      "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define KP_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define KP_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define KP_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define KP_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(KP_LOWER_PRECISION)
  AT_FORALL_FP32(KP_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(KP_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(KP_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));
#undef KP_LOWER_PRECISION
#undef KP_FP32
#undef KP_FP32_SET_OPT_DTYPE
#undef KP_PROMOTE
}

} // namespace
} // namespace kernel_pytorch
