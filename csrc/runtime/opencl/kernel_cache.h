// The kernel table's programs: built once per (device, dtype) on first use,
// from a binary cached on disk when one matches (keyed by device name,
// vendor, driver version, OpenCL version, build options and a hash of the
// source) and from source otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cl_api.h"
#include "kpdr.h"

namespace kpdr_opencl {

class Runtime;

// One argument value of a launch: up to 64 bytes (a long8), kept inline.
struct KernelArgValue {
  uint32_t size = 0;
  bool buffer = false;  // a cl_mem
  bool valid = false;   // (in Kernel::last) the kernel object holds these bytes
  alignas(8) unsigned char bytes[64];
};

// One kernel object; clSetKernelArg is not thread safe, so the arguments are
// set and the launch enqueued under `mutex`.
struct Kernel {
  cl_kernel kernel = nullptr;
  size_t work_group = 0;  // the KP_WG the program was built with
  bool shuffles = false;  // the program was built with KP_SHFL (warp shuffles: kp_decode_attention_shfl)
  std::mutex mutex;
  std::vector<KernelArgValue> last;  // the values set on `kernel`, by index; under mutex
};

// The arguments of one launch, collected before the kernel's lock is taken:
// inline storage (no allocation per argument), set on the kernel object by
// set_on. A kernel object keeps its argument values between launches, so a
// value equal to the one it holds is not set again: most of a launch's
// arguments (sizes, strides, offsets, scalars) repeat from call to call, and
// each clSetKernelArg is a driver call. Buffers are set every time: a
// released cl_mem's handle may come back for a new buffer, and drivers may
// resolve the buffer when the argument is set.
class KernelArgs {
 public:
  static constexpr size_t kMax = 48;
  void add(const void* value, size_t size, bool buffer = false) {
    if (count_ == kMax || size > sizeof(KernelArgValue::bytes)) {
      throw std::length_error("a kernel launch with more arguments than KernelArgs holds");
    }
    KernelArgValue& v = values_[count_++];
    v.size = static_cast<uint32_t>(size);
    v.buffer = buffer;
    std::memcpy(v.bytes, value, size);
  }
  size_t size() const { return count_; }
  // Sets the arguments on `kernel` (the caller holds kernel.mutex). On a
  // failure returns the status and the failing index in *failed.
  cl_int set_on(const ClApi& cl, Kernel& kernel, size_t* failed) const {
    if (kernel.last.size() < count_) kernel.last.resize(count_);
    for (size_t i = 0; i < count_; ++i) {
      const KernelArgValue& v = values_[i];
      KernelArgValue& held = kernel.last[i];
      if (!v.buffer && held.valid && held.size == v.size && std::memcmp(held.bytes, v.bytes, v.size) == 0) continue;
      const cl_int status = cl.SetKernelArg(kernel.kernel, static_cast<cl_uint>(i), v.size, v.bytes);
      if (status != CL_SUCCESS) {
        held.valid = false;
        *failed = i;
        return status;
      }
      held = v;
      held.valid = !v.buffer;
    }
    return CL_SUCCESS;
  }

 private:
  KernelArgValue values_[kMax];
  size_t count_ = 0;
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
    std::map<std::string, std::unique_ptr<Kernel>, std::less<>> kernels;  // found by const char* without a copy
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
