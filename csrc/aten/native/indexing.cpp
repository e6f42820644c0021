// Indexing, masking and concatenation: ATen's CPU kernels on my_asic tensors
// (host_kernels.h).
#include <ATen/ops/cat_native.h>
#include <ATen/ops/index_select_native.h>
#include <ATen/ops/masked_fill_native.h>

#include "structured.h"

namespace kernel_pytorch::native {
namespace {

using at::native::structured_cat_out_cpu;

// cat's meta precomputes what its impl takes instead of the arguments.
template <class Wrapper>
void run_cat(Wrapper& op, const at::ITensorListRef& tensors, int64_t dim) {
  auto p = op.meta(tensors, dim);
  op.impl(
      tensors, p.dim, p.valid, p.all_contiguous, p.all_same_dtype, p.all_same_sizes_and_stride, p.memory_format,
      op.maybe_get_output(0));
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, tensors);
  structured::Functional<structured_cat_out_cpu, 1> op;
  run_cat(op, tensors, dim);
  return op.take(0);
}

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  const HostKernelScope scope(detail::DeviceRuleTag<true>{}, tensors, detail::Written{out});
  structured::Given<structured_cat_out_cpu, 1, false> op(out);
  run_cat(op, tensors, dim);
  op.finish();
  return out;
}

} // namespace

void register_indexing(Registrar& r) {
  using MaskedFillScalar = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const at::Scalar&);
  using MaskedFillTensor = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const at::Tensor&);
  r.impl("cat", TORCH_FN(cat));
  r.impl("cat.out", TORCH_FN(cat_out));
  r.impl("index_select", TORCH_FN((ExactSameHostKernel<&at::native::index_select_cpu_>::call)));
  r.impl("index_select.out", TORCH_FN((ExactSameHostKernel<&at::native::index_select_out_cpu_>::call)));
  r.impl(
      "masked_fill_.Scalar",
      TORCH_FN((HostKernel<static_cast<MaskedFillScalar>(&at::native::masked_fill__cpu)>::call)));
  r.impl(
      "masked_fill_.Tensor",
      TORCH_FN((HostKernel<static_cast<MaskedFillTensor>(&at::native::masked_fill__cpu)>::call)));
}

} // namespace kernel_pytorch::native
