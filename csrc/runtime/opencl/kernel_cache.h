// The kernel table's programs: built once per (device, dtype) on first use,
// from a binary cached on disk when one matches (keyed by device name,
// vendor, driver version, OpenCL version, build options and a hash of the
// source) and from source otherwise.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cl_api.h"
#include "kpdr.h"

namespace kpdr_opencl {

class Runtime;

// One kernel object; clSetKernelArg is not thread safe, so the arguments are
// set and the launch enqueued under `mutex`.
struct Kernel {
  cl_kernel kernel = nullptr;
  size_t work_group = 0;  // the KP_WG the program was built with
  std::mutex mutex;
};

class KernelCache {
 public:
  explicit KernelCache(Runtime& runtime) : runtime_(runtime) {}
  ~KernelCache();
  // The kernel `name` of the program for (device, dtype); builds it on first
  // use. A failed build is reported (with the compiler's log) on every call.
  kpdrError_t get(int device, kpdrDtype dtype, const char* name, Kernel** kernel);

 private:
  struct Program {
    cl_program program = nullptr;
    size_t work_group = 0;
    std::string error;  // set when the build failed
    kpdrError_t code = KPDR_SUCCESS;
    std::map<std::string, std::unique_ptr<Kernel>> kernels;
  };
  kpdrError_t build(int device, kpdrDtype dtype, Program* program);

  Runtime& runtime_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<Program>> programs_;  // guarded by mutex_
};

}  // namespace kpdr_opencl
