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
  bool shuffles = false;  // the program was built with KP_SHFL (warp shuffles: kp_decode_attention_shfl)
  std::mutex mutex;
};

class KernelCache {
 public:
  explicit KernelCache(Runtime& runtime) : runtime_(runtime) {}
  ~KernelCache();
  // The kernel `name` of the program for (device, dtype); builds it on first
  // use. A failed build is reported (with the compiler's log) on every call.
  kpdrError_t get(int device, kpdrDtype dtype, const char* name, Kernel** kernel);
  // The kernel `name` of a generated program (`source`, e.g. one pointwise op
  // for one set of dtypes): built once per (device, source) like the fixed
  // programs, and cached on disk the same way. `what` names it in errors.
  kpdrError_t get_generated(int device, const std::string& source, const std::string& what, const char* name,
                            Kernel** kernel);

 private:
  struct Program {
    cl_program program = nullptr;
    size_t work_group = 0;
    bool shuffles = false;
    std::string error;  // set when the build failed
    kpdrError_t code = KPDR_SUCCESS;
    std::map<std::string, std::unique_ptr<Kernel>> kernels;
  };
  kpdrError_t build(int device, kpdrDtype dtype, Program* program);
  kpdrError_t build_source(int device, const std::string& source, const std::string& defines,
                           const std::string& what, Program* program);
  kpdrError_t kernel_of(Program* program, const char* name, Kernel** kernel);

  Runtime& runtime_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<Program>> programs_;  // guarded by mutex_
  std::map<std::pair<int, std::string>, std::unique_ptr<Program>> generated_;  // guarded by mutex_
};

}  // namespace kpdr_opencl
