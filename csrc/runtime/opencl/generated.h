// Launching generated OpenCL C (pointwise.cpp, losses.cpp): the kernel
// arguments of one call, the per-(device, source) kernel objects, and the
// shared prelude of loads and stores per kpdrDtype (ldD/stD).
#pragma once

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "errors.h"
#include "kernel_cache.h"
#include "kpdr.h"
#include "runtime.h"

namespace kpdr_opencl {

// OpenCL C helpers every generated program starts with (pointwise.cpp).
extern const char* const kPrelude;
// Decomposes `index` (below the product of the sizes) row-major over `count`
// dimensions of sizes `sz` (a long8 argument) into offsets += i_d * stride for
// each (name, long8) pair.
std::string decompose(const std::string& index, int count, const std::string& sz,
                      const std::vector<std::pair<std::string, std::string>>& offsets);

// Kernel arguments and the allocations that must outlive the enqueue.
class Args {
 public:
  Args(Runtime* runtime, int device, const char* api) : runtime_(runtime), device_(device), api_(api) {}
  kpdrError_t tensor(const void* ptr, const char* name) {
    DeviceRange range;
    if (!runtime_->device_memory().find(ptr, &range)) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": " + name + " is not device memory of this runtime");
    }
    if (range.allocation->device != device_) {
      return fail(KPDR_ERROR_INVALID_VALUE, std::string(api_) + ": " + name + " lives on device " +
                                                std::to_string(range.allocation->device) +
                                                " but the stream belongs to device " + std::to_string(device_));
    }
    mem(range.allocation->mem, range.offset);
    hold(std::move(range.allocation));
    return KPDR_SUCCESS;
  }
  void mem(cl_mem m, uint64_t offset) {
    args_.add(&m, sizeof(m), /*buffer=*/true);
    add(&offset, sizeof(offset));
  }
  void unused_tensor() { mem(first_mem_, 0); }  // a placeholder the kernel never reads
  void i64(int64_t v) { add(&v, sizeof(v)); }
  void i32(int32_t v) { add(&v, sizeof(v)); }
  void f32(float v) { add(&v, sizeof(v)); }
  void long4(const int64_t* v) { add(v, 4 * sizeof(int64_t)); }
  void long8(const int64_t* v, int count) {
    int64_t values[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < count; ++i) values[i] = v[i];
    add(values, sizeof(values));
  }
  kpdrError_t run(Kernel* kernel, Stream& stream, size_t global, size_t local) {
    const ClApi& cl = runtime_->cl();
    std::lock_guard<std::mutex> lock(kernel->mutex);
    size_t failed = 0;
    if (const cl_int status = args_.set_on(cl, *kernel, &failed)) {
      return fail(KPDR_ERROR_UNKNOWN, std::string(api_) + ": clSetKernelArg(" + std::to_string(failed) +
                                          ") failed with " + cl_error_name(status));
    }
    return stream.submit(api_, [&](cl_command_queue queue, cl_event* done) {
      return cl.EnqueueNDRangeKernel(queue, kernel->kernel, 1, nullptr, &global, local ? &local : nullptr, 0,
                                     nullptr, done);
    });
  }

 private:
  void add(const void* value, size_t size) { args_.add(value, size); }
  void hold(std::shared_ptr<Allocation> allocation) {
    if (first_mem_ == nullptr) first_mem_ = allocation->mem;
    if (held_ < kHeld) holders_[held_++] = std::move(allocation);
    else more_holders_.push_back(std::move(allocation));
  }
  static constexpr int kHeld = 6;
  Runtime* runtime_;
  int device_;
  const char* api_;
  KernelArgs args_;
  cl_mem first_mem_ = nullptr;
  // Alive until enqueued (inline for the usual few tensors).
  std::shared_ptr<Allocation> holders_[kHeld];
  int held_ = 0;
  std::vector<std::shared_ptr<Allocation>> more_holders_;
};

// Kernel objects by (device, key, name): the generated source is made and
// looked up in the kernel cache only on a miss. Looked up by views (no copy
// of the key per launch).
struct GeneratedKernelKey {
  int device;
  std::string key, name;
};
struct GeneratedKernelView {
  int device;
  std::string_view key, name;
};
struct GeneratedKernelLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::tuple<int, std::string_view, std::string_view>(a.device, a.key, a.name) <
           std::tuple<int, std::string_view, std::string_view>(b.device, b.key, b.name);
  }
};

template <typename Make>
kpdrError_t kernel_for(Runtime* runtime, int device, const std::string& key, const char* name, Make&& make,
                       Kernel** kernel) {
  static std::mutex mutex;
  static std::map<GeneratedKernelKey, Kernel*, GeneratedKernelLess> kernels;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = kernels.find(GeneratedKernelView{device, key, name});
    if (it != kernels.end()) {
      *kernel = it->second;
      return KPDR_SUCCESS;
    }
  }
  if (kpdrError_t error = runtime->kernels().get_generated(device, make(), key, name, kernel)) return error;
  std::lock_guard<std::mutex> lock(mutex);
  kernels[GeneratedKernelKey{device, key, name}] = *kernel;
  return KPDR_SUCCESS;
}

inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

template <typename Body>
kpdrError_t guarded(const char* api, Body&& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string(api) + ": internal error: " + error.what());
  }
}

inline kpdrError_t stream_of(const char* api, kpdrStream_t handle, Runtime** runtime, std::shared_ptr<Stream>* stream) {
  if (kpdrError_t error = Runtime::acquire(runtime)) return error;
  if (handle == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": stream is NULL");
  *stream = (*runtime)->streams().find(handle);
  if (*stream == nullptr) return fail(KPDR_ERROR_INVALID_HANDLE, std::string(api) + ": unknown stream handle");
  return KPDR_SUCCESS;
}

inline kpdrError_t check_shape(const char* api, int32_t ndim, const int64_t* sizes, int64_t* count) {
  if (ndim < 0 || ndim > KPDR_MAX_DIMS) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": ndim " + std::to_string(ndim) + " is outside 0.." +
                                              std::to_string(KPDR_MAX_DIMS));
  }
  *count = 1;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": negative size");
    *count *= sizes[d];
  }
  return KPDR_SUCCESS;
}

// Enough work-items to fill the device, each looping over the rest.
inline size_t grid(int64_t n, size_t wg, int compute_units) {
  const size_t cap = static_cast<size_t>(std::max(1, compute_units)) * wg * 32;
  return std::min(round_up(static_cast<size_t>(n), wg), round_up(cap, wg));
}

}  // namespace kpdr_opencl
