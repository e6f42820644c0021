// Python bindings of the CUDA backend: what was built, and the tuner's choices.
#include "ops/cuda/python_bindings.h"

#include <cuda_runtime.h>

#include "kernels/cuda/kernels_cuda.h"
#include "ops/cuda/tuner.h"

namespace kernel_pytorch::ops::cuda {

std::string cuda_info() {
  std::string info = "built for " + kp::cuda::built_archs() + " (nvcc " + kp::cuda::nvcc_version() + ")";
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return info + "; no CUDA device visible";
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    info += "; cuda:" + std::to_string(d) + " " + prop.name + " (sm_" + std::to_string(prop.major) +
            std::to_string(prop.minor) + ")";
    if (!kp::cuda::built_for(prop.major, prop.minor)) {
      info += " has no kernels in this build: reinstall with TORCH_CUDA_ARCH_LIST=\"" +
              std::to_string(prop.major) + "." + std::to_string(prop.minor) + "\"";
    }
  }
  return info;
}

void add_python_bindings(py::module_& m) {
  m.def("_kp_cuda_info", &cuda_info);
  m.def("_kp_tuning_enabled", &tuning_enabled);
  m.def("_kp_tuning_cache_path", &tuning_cache_path);
  m.def("_kp_clear_tuning", &clear_tuning);
  m.def("_kp_tuning_entries", [] {
    py::list out;
    for (const auto& e : tuning_entries()) {
      py::dict d;
      d["key"] = e.key;
      d["threads"] = e.config.threads;
      d["split"] = e.config.split;
      d["us"] = e.microseconds;
      d["source"] = e.source;
      out.append(d);
    }
    return out;
  });
}

}  // namespace kernel_pytorch::ops::cuda
