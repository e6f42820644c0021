// Launching generated OpenCL C (pointwise.cpp, losses.cpp, and the other
// entries): the kernel arguments of one call, the per-(device, source) kernel
// objects, a call's scratch buffer, the shared prelude of loads and stores per
// kpdrDtype (ldD/stD) and the work-group pieces of the sources.
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
// Programs whose kernels run in work-groups of exactly KP_WG work-items (the
// kernel cache's build option) start with kGroupHead (WG names that size) and
// declare those kernels with kGroupAttr.
inline constexpr const char* kGroupHead = "#define WG KP_WG\n";
inline constexpr const char* kGroupAttr = "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void ";

// OpenCL C: the tree combining the work-group's values part[0..WG) (a __local
// array; work-item t's value at part[t], already behind a barrier) into
// part[0]; combine(a, b) gives the expression combining two. Ends behind a
// barrier, so every work-item may then read part[0].
template <typename Combine>
std::string group_tree(const std::string& part, Combine&& combine) {
  return "  for (int h = WG / 2; h > 0; h >>= 1) {\n"
         "   if (t < h) " + part + "[t] = " + combine(part + "[t]", part + "[t + h]") + ";\n"
         "   barrier(CLK_LOCAL_MEM_FENCE);\n  }\n";
}

// kpdrDtypes by kind.
inline bool is_float_dtype(kpdrDtype d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_BFLOAT16; }
inline bool is_known_dtype(kpdrDtype d) { return d >= KPDR_DTYPE_FLOAT32 && d <= KPDR_DTYPE_INT32; }
inline bool is_integer_dtype(kpdrDtype d) {
  return d == KPDR_DTYPE_BOOL || d == KPDR_DTYPE_INT32 || d == KPDR_DTYPE_INT64;
}

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
  // run() in work-groups of the kernel's size, enough of them for `n` elements
  // (grid(): each work-item loops over the rest).
  kpdrError_t run_grid(Kernel* kernel, Stream& stream, int64_t n);

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

// stream_of for an entry's call, then its args pointer checked.
inline kpdrError_t entry_stream(const char* api, kpdrStream_t handle, const void* args, Runtime** runtime,
                                std::shared_ptr<Stream>* stream) {
  if (kpdrError_t error = stream_of(api, handle, runtime, stream)) return error;
  if (args == nullptr) return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": args is NULL");
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

inline kpdrError_t Args::run_grid(Kernel* kernel, Stream& stream, int64_t n) {
  const size_t wg = kernel->work_group;
  return run(kernel, stream, grid(n, wg, runtime_->device(device_).compute_units), wg);
}

// A call's scratch buffer: the stream's workspace when it is free and large
// enough, else a new buffer. Handed back to the stream when this goes out of
// scope, after the kernels that use it are enqueued: the queue runs in order.
class Scratch {
 public:
  explicit Scratch(Stream& stream) : stream_(stream) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (mem_ != nullptr) stream_.return_workspace(mem_, bytes_);
  }
  // `purpose`, when given, follows the size in the out-of-memory error
  // ("scan: a scratch buffer of 4 KiB for block totals failed (...)").
  kpdrError_t acquire(Runtime* runtime, const char* api, size_t bytes, const std::string& purpose = "") {
    cl_mem mem = stream_.borrow_workspace(bytes);
    if (mem == nullptr) {
      cl_int status = CL_SUCCESS;
      mem = runtime->cl().CreateBuffer(runtime->context(), CL_MEM_READ_WRITE, bytes, nullptr, &status);
      if (mem == nullptr || status != CL_SUCCESS) {
        return fail(KPDR_ERROR_OUT_OF_MEMORY, std::string(api) + ": a scratch buffer of " + bytes_text(bytes) +
                                                  (purpose.empty() ? "" : " " + purpose) + " failed (" +
                                                  cl_error_name(status) + ")");
      }
    }
    mem_ = mem;
    bytes_ = bytes;
    return KPDR_SUCCESS;
  }
  cl_mem mem() const { return mem_; }

 private:
  Stream& stream_;
  cl_mem mem_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace kpdr_opencl
