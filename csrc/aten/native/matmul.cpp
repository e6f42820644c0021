// The matmul family: ATen's structured CPU kernels (BLAS / oneDNN) on my_asic
// tensors (host_kernels.h).
#include <ATen/ops/addmm_native.h>
#include <ATen/ops/baddbmm_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/mm_native.h>

#include "structured.h"

namespace kernel_pytorch::native {

void register_matmul(Registrar& r) {
  using namespace at::native;
  using T = const at::Tensor&;
  using S = const at::Scalar&;
  r.impl("addmm", TORCH_FN((Op<structured_addmm_out_cpu, T, T, T, S, S>::functional)));
  r.impl("addmm.out", TORCH_FN((Op<structured_addmm_out_cpu, T, T, T, S, S>::out)));
  r.impl("addmm_", TORCH_FN((InplaceOp<structured_addmm_out_cpu, T, T, S, S>::inplace)));
  r.impl("mm", TORCH_FN((Op<structured_mm_out_cpu, T, T>::functional)));
  r.impl("mm.out", TORCH_FN((Op<structured_mm_out_cpu, T, T>::out)));
  r.impl("bmm", TORCH_FN((Op<structured_bmm_out_cpu, T, T>::functional)));
  r.impl("bmm.out", TORCH_FN((Op<structured_bmm_out_cpu, T, T>::out)));
  r.impl("baddbmm", TORCH_FN((Op<structured_baddbmm_out_cpu, T, T, T, S, S>::functional)));
  r.impl("baddbmm.out", TORCH_FN((Op<structured_baddbmm_out_cpu, T, T, T, S, S>::out)));
  r.impl("baddbmm_", TORCH_FN((InplaceOp<structured_baddbmm_out_cpu, T, T, S, S>::inplace)));
}

} // namespace kernel_pytorch::native
