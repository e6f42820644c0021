// What this build of the CUDA kernel library contains, and device facts the
// launchers need.
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kernels_cuda.h"

namespace kp::cuda {

std::string built_archs() {
#ifdef __CUDA_ARCH_LIST__
  // nvcc lists the virtual architectures it compiles for, e.g. 800,900.
  static const int archs[] = {__CUDA_ARCH_LIST__};
  std::string s;
  for (int a : archs) {
    if (!s.empty()) s += ", ";
    s += "sm_" + std::to_string(a / 10);
  }
  return s;
#else
  return "unknown architectures";
#endif
}

std::string nvcc_version() {
  return std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__);
}

bool built_for(int major, int minor) {
#ifdef __CUDA_ARCH_LIST__
  static const int archs[] = {__CUDA_ARCH_LIST__};
  // A kernel image runs on its own major architecture at the same or a newer
  // minor revision (PTX would JIT to newer majors too, but we report SASS).
  for (int a : archs) {
    if (a / 100 == major && (a / 10) % 10 <= minor) return true;
  }
  return false;
#else
  return true;
#endif
}

int sm_count() {
  static int counts[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
  if (counts[dev] == 0) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) n = 132;
    counts[dev] = n;
  }
  return counts[dev];
}

}  // namespace kp::cuda
