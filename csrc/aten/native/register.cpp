// Registers my_asic's native kernels (host_kernels.h) at device initialisation.
#include "host_kernels.h"
#include "runtime_conv.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>
#include <unordered_map>

namespace kernel_pytorch::native {

namespace {
// The aten operator a registration name ("add.Tensor", "relu") refers to.
c10::OperatorHandle aten_op(const char* name) {
  const char* dot = std::strchr(name, '.');
  auto op = c10::Dispatcher::singleton().findOp(c10::OperatorName(
      std::string("aten::") + (dot ? std::string(name, dot - name) : std::string(name)), dot ? dot + 1 : ""));
  TORCH_INTERNAL_ASSERT(op.has_value(), "my_asic native kernels: no operator aten::", name);
  return *op;
}

std::unordered_map<const void*, c10::OperatorHandle>& operators() {
  static std::unordered_map<const void*, c10::OperatorHandle> ops;
  return ops;
}

std::vector<std::string>& names() {
  static std::vector<std::string> n;
  return n;
}
} // namespace

bool Registrar::has_my_asic_kernel(const char* name) {
  return aten_op(name).hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1);
}

void remember_operator(const void* kernel, const char* name) {
  operators().emplace(kernel, aten_op(name));
}

const c10::OperatorHandle& operator_of(const void* kernel) {
  auto it = operators().find(kernel);
  TORCH_INTERNAL_ASSERT(it != operators().end(), "my_asic native kernels: kernel without an operator");
  return it->second;
}

int64_t register_host_kernels() {
  static const int64_t count = [] {
    if (!host_addressable()) {
      // The runtime's own core-op kernels (kpdr.h), where it brings them.
      static auto* runtime_lib = new torch::Library(
          torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
      Registrar r(*runtime_lib);
      register_runtime_gemm(r);
      register_runtime_pointwise(r);
      register_runtime_reduce(r);
      register_runtime_losses(r);
      register_runtime_statistics(r);
      register_runtime_pooling(r);
      register_runtime_unfold(r);
      register_runtime_indexing(r);
      register_runtime_tensor_ops(r);
      register_runtime_random(r);
      register_runtime_sort(r);
      register_runtime_resample(r);
      register_runtime_scan(r);
      register_runtime_group_norm(r);
      names() = r.registered();
      return static_cast<int64_t>(names().size());
    }
    use_cpu_kernels_for_stubs();
    // Kept alive for the process: the registrations live as long as it does.
    static auto* lib = new torch::Library(
        torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    Registrar r(*lib);
    register_factories_and_random(r);
    register_pointwise(r);
    register_reductions(r);
    register_matmul(r);
    register_nn(r);
    register_indexing(r);
    register_attention(r);
    names() = r.registered();
    return static_cast<int64_t>(names().size());
  }();
  return count;
}

const std::vector<std::string>& host_kernel_names() {
  return names();
}

} // namespace kernel_pytorch::native
