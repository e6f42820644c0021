// The device core's public interface: the only header of csrc/core that the
// layers above it (ATen glue, profiler, ops, distributed, the Python module)
// include. docs/architecture.md draws the layers.
//
// The PyTorch side's only door to the hardware is the kpdr device-runtime ABI
// (csrc/runtime/kpdr.h), loaded with dlopen: everything calls the runtime
// through `rt()` and converts its errors with KPDR_CHECK.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/Stream.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <functional>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "runtime/kpdr.h"

namespace at { struct HostAllocator; } // <ATen/core/CachingHostAllocator.h>, for its users only
// As pybind11 declares it (hidden visibility), without its headers.
namespace pybind11 __attribute__((visibility("hidden"))) { class module_; }

namespace kernel_pytorch {

// Table of the runtime's entry points, filled from the loaded library.
struct RuntimeApi {
  uint32_t (*GetAbiVersion)();
  kpdrError_t (*Init)(const char*);
  const char* (*GetErrorString)(kpdrError_t);
  const char* (*GetLastErrorMessage)();
  kpdrError_t (*GetDeviceCount)(int*);
  kpdrError_t (*GetDeviceProperties)(int, kpdrDeviceProperties*);
  kpdrError_t (*DeviceSynchronize)(int);
  kpdrError_t (*MemGetInfo)(int, size_t*, size_t*);
  kpdrError_t (*Malloc)(int, void**, size_t);
  kpdrError_t (*Free)(int, void*);
  kpdrError_t (*MallocHost)(void**, size_t);
  kpdrError_t (*FreeHost)(void*);
  kpdrError_t (*PointerGetDevice)(const void*, int*);
  kpdrError_t (*MemcpyAsync)(void*, const void*, size_t, kpdrMemcpyKind, kpdrStream_t);
  kpdrError_t (*StreamCreate)(int, int, kpdrStream_t*);
  kpdrError_t (*StreamDestroy)(kpdrStream_t);
  kpdrError_t (*StreamSynchronize)(kpdrStream_t);
  kpdrError_t (*StreamQuery)(kpdrStream_t);
  kpdrError_t (*StreamWaitEvent)(kpdrStream_t, kpdrEvent_t);
  kpdrError_t (*EventCreate)(int, unsigned int, kpdrEvent_t*);
  kpdrError_t (*EventDestroy)(kpdrEvent_t);
  kpdrError_t (*EventRecord)(kpdrEvent_t, kpdrStream_t);
  kpdrError_t (*EventQuery)(kpdrEvent_t);
  kpdrError_t (*EventSynchronize)(kpdrEvent_t);
  kpdrError_t (*EventElapsedTime)(float*, kpdrEvent_t, kpdrEvent_t);
};

// Chooses the runtime library and its kpdrInit options. Only legal before the
// runtime is initialised; afterwards it raises unless nothing would change.
void set_runtime_config(const std::string& library_path, const std::string& options);
std::string runtime_library_path();
std::string runtime_options();

// Loads and initialises the runtime on first use (thread safe) and returns it.
// Raises a c10::Error naming the library and the fix when that fails, and in a
// child process forked after initialisation.
const RuntimeApi& rt();
bool runtime_initialized();
bool in_bad_fork();

// Never throws: 0 when the runtime cannot be loaded (like cudaGetDeviceCount
// without a driver), so torch can ask "is it available?" safely.
c10::DeviceIndex device_count_noexcept() noexcept;
c10::DeviceIndex device_count();
void check_device_index(c10::DeviceIndex index);

// The calling thread's current device (like cudaSetDevice: per thread).
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// Cached properties (they never change after initialisation).
const kpdrDeviceProperties& device_properties(c10::DeviceIndex index);
// The runtime's optional kernels (kpdrGetKernels); entries it lacks are null,
// and so is every entry for a runtime without kpdrGetKernels.
const kpdrKernelTable& runtime_kernels();
// Whether host code may read/write device memory directly (all devices agree;
// the loader checks that at initialisation).
bool host_addressable();

[[noreturn]] void raise_runtime_error(kpdrError_t err, const char* call, const char* file, int line);

std::string format_bytes(size_t bytes);

// Converts a failing runtime call into a c10::Error with the runtime's detail.
#define KPDR_CHECK(expr)                                                     \
  do {                                                                       \
    kpdrError_t kpdr_err__ = (expr);                                         \
    if (C10_UNLIKELY(kpdr_err__ != KPDR_SUCCESS)) {                          \
      ::kernel_pytorch::raise_runtime_error(kpdr_err__, #expr, __FILE__, __LINE__); \
    }                                                                        \
  } while (0)

// Device activity hooks. Core brackets every piece of device work it starts
// (stream submissions here, host kernels and copies in the ATen glue) with
// StreamWork / HostWork; the profiler layer (csrc/profiler/device_activity.cpp)
// records them by installing `hooks` and setting `recording_flag` while a
// session runs. Core never includes the profiler. With no session, each bracket costs
// one relaxed atomic load.
namespace activity {

enum class Kind : uint8_t {
  RuntimeKernel, // one of the runtime's kernels (kpdrKernelTable)
  HostKernel, // a native kernel run on device memory by the host thread
  MemcpyHtoD,
  MemcpyDtoH,
  MemcpyDtoD,
};

inline Kind memcpy_kind(kpdrMemcpyKind kind) {
  return kind == KPDR_MEMCPY_HOST_TO_DEVICE ? Kind::MemcpyHtoD
      : kind == KPDR_MEMCPY_DEVICE_TO_HOST  ? Kind::MemcpyDtoH
                                            : Kind::MemcpyDtoD;
}

class StreamWork;
class HostWork;
// Set once by the profiler layer when the extension loads; called only while
// recording() is true (the profiler sets the flag after installing them).
struct Hooks {
  void (*stream_begin)(StreamWork&, Kind, const char* name, uint64_t bytes, const c10::Stream&);
  void (*stream_end)(StreamWork&);
  void (*host_begin)(HostWork&, Kind, uint64_t bytes, const c10::Stream&, int64_t submitted_ns);
  void (*host_end)(HostWork&);
};
extern Hooks hooks;
extern std::atomic<bool> recording_flag;

// Whether a session is recording; the only cost of every hook when not.
inline bool recording() noexcept {
  return C10_UNLIKELY(recording_flag.load(std::memory_order_relaxed));
}

// Brackets one submission to a runtime stream:
//   StreamWork w(kind, name, bytes, stream);  // records the start event
//   ...submit...;
//   w.submitted();                             // records the end event
// A submission that fails (no submitted()) is not recorded.
class StreamWork {
 public:
  StreamWork(Kind kind, const char* name, uint64_t bytes, const c10::Stream& stream) {
    if (recording()) {
      hooks.stream_begin(*this, kind, name, bytes, stream);
    }
  }
  void submitted() {
    if (C10_UNLIKELY(slot >= 0)) {
      hooks.stream_end(*this);
    }
  }
  StreamWork(const StreamWork&) = delete;
  StreamWork& operator=(const StreamWork&) = delete;

  // The profiler's bookkeeping (only its hooks touch these).
  int64_t slot = -1; // index of its record in the session
  uint64_t generation = 0; // of the session that holds the record
};

// Brackets device work run by the calling thread in stream order, once the
// stream has drained. Callers begin only the outermost one on a thread: work
// nested in it is part of it.
class HostWork {
 public:
  HostWork() = default;
  // submitted_ns: when the host thread took the work on (before waiting for
  // the stream, c10::getTime()); -1: now.
  void begin(Kind kind, uint64_t bytes, const c10::Stream& stream, int64_t submitted_ns = -1) {
    if (recording()) {
      hooks.host_begin(*this, kind, bytes, stream, submitted_ns);
    }
  }
  // The work did not run after all (its caller takes another path).
  void dismiss() {
    active = false;
  }
  ~HostWork() {
    if (C10_UNLIKELY(active)) {
      hooks.host_end(*this);
    }
  }
  HostWork(const HostWork&) = delete;
  HostWork& operator=(const HostWork&) = delete;

  // The profiler's bookkeeping (only its hooks touch these).
  bool active = false;
  Kind kind{};
  uint64_t bytes = 0;
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;
  uint64_t correlation = 0;
  uint64_t generation = 0;
  int64_t submitted_ns = 0;
  int64_t start_ns = 0;
};

// The name a runtime kernel is recorded under, from its argument struct.
inline const char* kernel_name(const kpdrRmsNormArgs&) { return "rms_norm"; }
inline const char* kernel_name(const kpdrSiluArgs&) { return "silu"; }
inline const char* kernel_name(const kpdrRopeArgs&) { return "rope"; }
inline const char* kernel_name(const kpdrSoftmaxArgs&) { return "softmax"; }
inline const char* kernel_name(const kpdrDecodeAttentionArgs&) { return "decode_attention"; }
inline const char* kernel_name(const kpdrPrefillAttentionArgs&) { return "prefill_attention"; }
inline const char* kernel_name(const kpdrMatmulVecArgs&) { return "matmul_vec"; }
inline const char* kernel_name(const kpdrGemmArgs&) { return "gemm"; }
inline const char* kernel_name(const kpdrPointwiseArgs&) { return "pointwise"; }
inline const char* kernel_name(const kpdrReduceArgs&) { return "reduce"; }
inline const char* kernel_name(const kpdrSoftmaxDimArgs&) { return "softmax_dim"; }
inline const char* kernel_name(const kpdrNllLossArgs&) { return "nll_loss"; }
inline const char* kernel_name(const kpdrLayerNormArgs&) { return "layer_norm"; }
inline const char* kernel_name(const kpdrIm2colArgs&) { return "im2col"; }
inline const char* kernel_name(const kpdrMaxPool2dArgs&) { return "max_pool2d"; }
inline const char* kernel_name(const kpdrIndexArgs&) { return "gather_scatter"; }
inline const char* kernel_name(const kpdrRandomArgs&) { return "random"; }
inline const char* kernel_name(const kpdrSortArgs&) { return "sort"; }
inline const char* kernel_name(const kpdrScanArgs&) { return "scan"; }

} // namespace activity

// Streams of the my_asic devices, as c10::Stream values.
//
// Like CUDA, each device has one default stream (id 0) and fixed pools of
// streams handed out round-robin (ids 1..kPoolSize for normal priority,
// kPoolSize+1..2*kPoolSize for high priority), created lazily on first use.
// The current stream is per thread and per device.
constexpr int kStreamPoolSize = 32;

kpdrStream_t native_stream(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);
// Returns the previous current stream of that stream's device.
c10::Stream exchange_current_stream(const c10::Stream& stream);
// priority: 0 normal, negative = high (lower numbers run first, as in CUDA).
c10::Stream stream_from_pool(c10::DeviceIndex device, int priority);
int stream_priority(const c10::Stream& stream);

void synchronize_stream(const c10::Stream& stream);
bool query_stream(const c10::Stream& stream);

// Records that work was enqueued on `stream` (so waits on it are not skipped).
void note_work_submitted(const c10::Stream& stream);

// Work submission. Every async call the glue makes goes through these, so a
// stream knows whether anything may still be pending on it: waiting on an
// idle stream (before every CPU-fallback op) then costs no runtime call.
void memcpy_async(void* dst, const void* src, size_t bytes, kpdrMemcpyKind kind, const c10::Stream& stream);
void stream_wait_event(const c10::Stream& stream, kpdrEvent_t event);
// Enqueues one of the runtime's kernels (kpdrKernelTable) on `stream`.
// Returns false, having enqueued nothing, when the kernel is absent (null) or
// answers KPDR_ERROR_NOT_SUPPORTED; raises on any other error.
template <typename Args>
bool launch_kernel(kpdrError_t (*kernel)(const Args*, kpdrStream_t), const Args& args,
                   const c10::Stream& stream) {
  if (kernel == nullptr) return false;
  activity::StreamWork work(activity::Kind::RuntimeKernel, activity::kernel_name(args), 0, stream);
  const kpdrError_t err = kernel(&args, native_stream(stream));
  if (err == KPDR_ERROR_NOT_SUPPORTED) return false;
  if (C10_UNLIKELY(err != KPDR_SUCCESS)) {
    // Named "kernel <name>" so the error handler sees a kernel failure.
    raise_runtime_error(err, (std::string("kernel ") + activity::kernel_name(args)).c_str(), __FILE__, __LINE__);
  }
  work.submitted();
  note_work_submitted(stream);
  return true;
}

// Blocks until the current stream of `device` has finished its work. Called
// before host code touches device memory (CPU kernels run on the host).
void wait_current_stream(c10::DeviceIndex device);

// Host kernel scope: while a CPU kernel computes on device memory (the
// native kernels of a host-addressable runtime), device work it starts on a
// stream must be complete before it returns, because the CPU code around it
// reads the memory at once. A `.contiguous()` inside an ATen CPU kernel, say,
// is a device-to-device copy on the stream.
inline int& host_kernel_depth() {
  static thread_local int depth = 0;
  return depth;
}

inline bool in_host_kernel() {
  return host_kernel_depth() > 0;
}

struct HostKernelDepth {
  HostKernelDepth() {
    ++host_kernel_depth();
  }
  ~HostKernelDepth() {
    --host_kernel_depth();
  }
  HostKernelDepth(const HostKernelDepth&) = delete;
  HostKernelDepth& operator=(const HostKernelDepth&) = delete;
};

// Caching device allocator for my_asic (c10::DeviceAllocator).
//
// Device memory comes from kpdrMalloc and is cached per device after a tensor
// dies, so a training loop does not call the runtime per step. Freed blocks
// are reused only by the stream they were allocated on (work on one stream is
// ordered); record_stream() makes a block wait for other streams' work.
class MyAsicDeviceAllocator final : public c10::DeviceAllocator {
 public:
  // Allocates on the calling thread's current my_asic device.
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Caps this process's reserved memory on `device` at fraction * capacity.
  void setMemoryFraction(double fraction, c10::DeviceIndex device);
  double getMemoryFraction(c10::DeviceIndex device);
  // True when ptr is the start of a live block of this allocator.
  bool owns(const void* ptr);
};

MyAsicDeviceAllocator& device_allocator();

// Calls fn(used bytes, total bytes) of `device` (total minus free, as
// mem_get_info reports them) after an allocation that took new device memory
// while the device's use is at or above `threshold_bytes`: the memory
// monitor's allocation-path check. Cached blocks reused cost nothing. One
// watch per device; an empty fn removes it.
void set_usage_watch(c10::DeviceIndex device, size_t threshold_bytes, std::function<void(size_t, size_t)> fn);

// The most this process may reserve on `device`, in bytes (SIZE_MAX: no cap):
// the smaller of MY_ASIC_ALLOC_CONF's max_pool_size_mb and the memory fraction.
size_t device_pool_limit(c10::DeviceIndex device);

// Grows or shrinks a device storage to `nbytes`, keeping the leading bytes
// (Tensor.resize_, UntypedStorage.resize_).
void resize_device_storage(c10::StorageImpl* storage, size_t nbytes);

// Pinned (page-locked) host memory for my_asic, from kpdrMallocHost.
// Tensor.pin_memory() and non_blocking copies use it. A block freed while an
// async copy may still read or write it is kept until that copy's event
// completes (record_event), so pinned buffers are never recycled too early.
at::HostAllocator* host_allocator();
// True when ptr lies inside memory from kpdrMallocHost.
bool is_pinned_ptr(const void* ptr);

// Host views of device memory, for runtimes whose device memory is host
// addressable (kpdrDeviceProperties::host_addressable).
//
// CPU kernels can then compute on my_asic tensors in place: a device tensor is
// re-wrapped as a CPU tensor over the same bytes (no copy), and while a CPU
// kernel runs for my_asic, the CPU allocations it makes for its outputs are
// served from the device's memory, so the outputs become my_asic tensors
// without a copy either.
// A CPU tensor aliasing `device_tensor` (same bytes, sizes, strides, offset).
at::Tensor host_alias(const at::Tensor& device_tensor);

// Turns CPU results of a kernel run for `device` into my_asic tensors:
// results over an aliased device storage or over device memory handed out
// while routing are wrapped without a copy; anything else is copied.
// `adopted` lets several results that share a storage keep sharing it.
class DeviceAdopter {
 public:
  explicit DeviceAdopter(c10::DeviceIndex device) : device_(device) {}
  at::Tensor adopt(const at::Tensor& cpu_result);
  // Makes `device_tensor` take over the (possibly resized/reallocated)
  // storage and geometry of its host alias after an out= kernel.
  void write_back(const at::Tensor& alias, const at::Tensor& device_tensor);

 private:
  c10::Storage device_storage_for(const at::Tensor& cpu_result);
  c10::DeviceIndex device_;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> adopted_;
};

// While alive, CPU allocations made on this thread come from `device`'s
// memory (still tagged as CPU memory, as CPU kernels expect).
class RouteCpuAllocationsToDevice {
 public:
  explicit RouteCpuAllocationsToDevice(c10::DeviceIndex device);
  ~RouteCpuAllocationsToDevice();
  RouteCpuAllocationsToDevice(const RouteCpuAllocationsToDevice&) = delete;
  RouteCpuAllocationsToDevice& operator=(const RouteCpuAllocationsToDevice&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// Installs the routing CPU allocator (idempotent). It defers to the allocator
// torch had before whenever no routing is active on the calling thread.
void install_routing_cpu_allocator();

// Random number generators of the my_asic devices.
//
// Random ops run as CPU kernels on device memory (see cpu_fallback.cpp), and
// those kernels only accept CPU generators. So each my_asic generator owns a
// CPU generator as its engine: seeding, state save/restore and cloning act on
// that engine, and the fallback hands the engine to the CPU kernel. The result
// is a per-device stream of random numbers that torch.manual_seed and
// torch.my_asic.manual_seed make reproducible.
class MyAsicGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit MyAsicGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type();

  // The CPU generator that CPU kernels draw from.
  const at::Generator& engine() const {
    return engine_;
  }

 private:
  MyAsicGeneratorImpl* clone_impl() const override;
  at::Generator engine_;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// The CPU engine to pass to a CPU kernel for a Generator? argument on `device`:
// the given my_asic generator's engine, or the device default's when absent.
at::Generator engine_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

// The Python bindings of the device core (torch.my_asic's device, memory,
// stream and generator calls), added to kernel_pytorch._C by csrc/python.
void init_core_bindings(pybind11::module_& m);

} // namespace kernel_pytorch
