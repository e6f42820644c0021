// Whether a CPU tensor and a my_asic tensor may take over each other's data in
// place (Tensor.set_data, `param.data = t`).
//
// nn.Module._apply (behind Module.to, .my_asic(), .cpu(), .half()) swaps a
// parameter's data in place only when torch._has_compatible_shallow_copy_type
// holds; otherwise it makes a new Parameter per module, which unties shared
// weights (GPT-2's lm_head/wte) and turns a lazy module's UninitializedParameter
// into a plain one. TensorImpl's built-in answer lists only the in-tree dense
// backends; for PrivateUse1 it is this operator (c10/core/TensorImpl.h,
// has_compatible_shallow_copy_type). Dense strided CPU and my_asic tensors are
// as interchangeable as CPU and CUDA ones.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace kernel_pytorch {
namespace {

bool is_dense_cpu_or_my_asic(const at::Tensor& t) {
  const c10::DispatchKeySet ks = t.key_set();
  return t.layout() == c10::kStrided && ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
      (ks.has_backend(c10::BackendComponent::CPUBit) ||
       ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (is_dense_cpu_or_my_asic(self) && is_dense_cpu_or_my_asic(from)) {
    return true;
  }
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}

} // namespace kernel_pytorch
