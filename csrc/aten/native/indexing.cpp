// Indexing, masking and concatenation: ATen's CPU kernels on my_asic tensors
// (host_kernels.h).
#include <ATen/ops/cat_native.h>
#include <ATen/ops/index_native.h>
#include <ATen/ops/index_select_native.h>
#include <ATen/ops/masked_fill_native.h>
#include <ATen/ops/tril_native.h>
#include <ATen/ops/triu_native.h>

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

// Advanced indexing (x[idx], cos[positions]): ATen's meta builds the
// iterator (moving index tensors to self's device), index_stub's CPU kernel
// gathers.
at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const HostKernelScope scope(self);
  structured::Functional<at::native::structured_index_out, 1> op;
  auto p = op.meta(self, indices);
  op.impl(self, p.sizes, p.strides, op.maybe_get_output(0));
  return op.take(0);
}

} // namespace

void register_indexing(Registrar& r) {
  using MaskedFillScalar = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const at::Scalar&);
  using MaskedFillTensor = at::Tensor& (*)(at::Tensor&, const at::Tensor&, const at::Tensor&);
  r.impl("cat", TORCH_FN(cat));
  r.impl("cat.out", TORCH_FN(cat_out));
  r.impl("index.Tensor", TORCH_FN(index));
  // tril/triu (causal masks): ATen's CPU loops, no stub.
  all_forms<at::native::structured_tril_cpu, int64_t>(r, "tril", "tril.out", "tril_");
  all_forms<at::native::structured_triu_cpu, int64_t>(r, "triu", "triu.out", "triu_");
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
