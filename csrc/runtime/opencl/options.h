// The runtime's configuration: environment variables (MY_ASIC_OPENCL_*)
// first, then the kpdrInit option string, key by key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kpdr.h"

namespace kpdr_opencl {

struct Options {
  std::string library = "libOpenCL.so.1";  // the ICD loader (or a vendor library)
  std::string platform;      // substring of the platform's name or vendor, any case
  std::string device_type = "default";  // gpu | cpu | accelerator | all | default
  std::string device;        // substring of the device name, any case
  int device_count = 0;      // 0: every matching device; else exactly this many (the first)
  std::vector<std::string> names;  // replaces the reported names (one per device)
  uint64_t memory_mb = 0;    // 0: the device's global memory; else a lower cap in MiB
  bool kernels = true;       // kpdrGetKernels entries (0: every op through the CPU fallback)
  std::string build_options; // appended to the OpenCL C compiler options
  std::string cache_dir;     // compiled-kernel cache; "off" disables it
  std::string gemm = "auto"; // GEMM kernel: auto | portable | mma | mma_emulated (gemm.cpp)
  // Command-queue profiling: "auto" turns it on for a stream when a timing
  // event is first recorded on it (queues.h); "always" for every queue.
  std::string profiling = "auto";
};

// Parses environment and `text`; on a bad value fails with INVALID_VALUE
// naming the key (or variable) and what is accepted.
kpdrError_t parse_options(const char* text, Options* options);

}  // namespace kpdr_opencl
