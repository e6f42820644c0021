// The matmul family: ATen's structured CPU kernels (BLAS / oneDNN) on my_asic
// tensors (host_kernels.h).
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/baddbmm_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/mm_native.h>

#include "structured.h"

namespace kernel_pytorch::native {

// Ops whose CUDA wrappers check every tensor (device_check.h).
template <>
inline constexpr bool exact_same_device<at::native::structured_addmm_out_cpu> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_mm_out_cpu> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_bmm_out_cpu> = true;
template <>
inline constexpr bool exact_same_device<at::native::structured_baddbmm_out_cpu> = true;
namespace {

using T = const at::Tensor&;
using S = const at::Scalar&;

bool reduced_float(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
template <class A>
bool reduced_float(const A&) {
  return false;
}

// ATen's CPU GEMMs for float16 and bfloat16 give wrong results when driven
// on device tensors (measured: an 8x10x7 bf16 addmm off by the result's
// magnitude), so those dtypes run on host aliases; the others natively.
template <class Native, class... Args>
struct Gemm {
  static at::Tensor functional(Args... args) {
    if ((reduced_float(args) || ...)) {
      return run_boxed<&run_on_host_aliases, at::Tensor, Args...>(kernel_key(&functional), args...);
    }
    return Native::functional(args...);
  }
  static at::Tensor& out(Args... args, at::Tensor& result) {
    if ((reduced_float(args) || ...) || reduced_float(result)) {
      return run_boxed<&run_on_host_aliases, at::Tensor&, Args..., at::Tensor&>(
          kernel_key(&out), args..., result);
    }
    return Native::out(args..., result);
  }
};

template <class Native, class... Rest>
struct GemmInplace {
  static at::Tensor& inplace(at::Tensor& self, Rest... rest) {
    if (reduced_float(self) || (reduced_float(rest) || ...)) {
      return run_boxed<&run_on_host_aliases, at::Tensor&, at::Tensor&, Rest...>(
          kernel_key(&inplace), self, rest...);
    }
    return Native::inplace(self, rest...);
  }
};

} // namespace

void register_matmul(Registrar& r) {
  using namespace at::native;
  using Addmm = Gemm<Op<structured_addmm_out_cpu, T, T, T, S, S>, T, T, T, S, S>;
  using Mm = Gemm<Op<structured_mm_out_cpu, T, T>, T, T>;
  using Bmm = Gemm<Op<structured_bmm_out_cpu, T, T>, T, T>;
  using Baddbmm = Gemm<Op<structured_baddbmm_out_cpu, T, T, T, S, S>, T, T, T, S, S>;
  r.impl("addmm", TORCH_FN(Addmm::functional));
  r.impl("addmm.out", TORCH_FN(Addmm::out));
  r.impl("addmm_", TORCH_FN((GemmInplace<InplaceOp<structured_addmm_out_cpu, T, T, S, S>, T, T, S, S>::inplace)));
  r.impl("mm", TORCH_FN(Mm::functional));
  r.impl("mm.out", TORCH_FN(Mm::out));
  r.impl("bmm", TORCH_FN(Bmm::functional));
  r.impl("bmm.out", TORCH_FN(Bmm::out));
  r.impl("baddbmm", TORCH_FN(Baddbmm::functional));
  r.impl("baddbmm.out", TORCH_FN(Baddbmm::out));
  r.impl(
      "baddbmm_", TORCH_FN((GemmInplace<InplaceOp<structured_baddbmm_out_cpu, T, T, S, S>, T, T, S, S>::inplace)));
}

} // namespace kernel_pytorch::native
