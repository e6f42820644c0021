#include "ops/ops.h"

#include <torch/extension.h>

#include "core/core.h"
#include "kernels/kernels.h"
#ifdef KP_WITH_CUDA
#include "ops/cuda/python_bindings.h"
#endif

namespace kernel_pytorch::ops {

namespace {

#ifndef KP_WITH_CUDA
// Why setup.py built no CUDA kernels (KP_CUDA_NOT_BUILT, set by setup.py).
std::string cuda_not_built() {
#if defined(KP_CUDA_NOT_BUILT) && KP_CUDA_NOT_BUILT == 1
  return "not built: the torch this package was built against is not a CUDA build";
#elif defined(KP_CUDA_NOT_BUILT) && KP_CUDA_NOT_BUILT == 2
  return "not built: nvcc was not found when this package was built (set CUDA_HOME)";
#elif defined(KP_CUDA_NOT_BUILT) && KP_CUDA_NOT_BUILT == 3
  return "not built: disabled with KP_BUILD_CUDA=0 when this package was built";
#else
  return "not built: this package was compiled without CUDA";
#endif
}
#endif

}  // namespace

void init_ops_bindings(py::module_& m) {
#ifdef KP_WITH_CUDA
  cuda::add_python_bindings(m);
#else
  m.def("_kp_cuda_info", &cuda_not_built);
#endif
  m.def("_kp_cpu_isa", [] { return std::string(kp::isa_name(kp::active_isa())); });
  m.def("_kp_best_cpu_isa", [] { return std::string(kp::isa_name(kp::best_supported_isa())); });
  m.def("_kp_set_cpu_isa", [](const std::string& name) {
    std::string error;
    TORCH_CHECK_VALUE(kp::set_active_isa(name, &error), "kernel_pytorch.ops.set_cpu_isa: ", error);
  });
  m.def("_kp_streaming_stores_min_bytes", [] { return kp::streaming_stores_min_bytes(); });
  m.def("_kp_set_streaming_stores_min_bytes", [](int64_t bytes) { kp::set_streaming_stores_min_bytes(bytes); });
  // Entries of the my_asic runtime's kernel table (kpdrKernelTable, whose
  // kernels are the library's) that are present.
  m.def("_runtime_kernel_names", [] {
    const kpdrKernelTable& t = runtime_kernels();
    std::vector<std::string> names;
#define KP_NAME_IF_PRESENT(ns, name, Args) if (t.name) names.emplace_back(#name);
    KP_CPU_KERNELS(KP_NAME_IF_PRESENT, _)
    return names;
  });
}

}  // namespace kernel_pytorch::ops
