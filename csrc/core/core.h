// The PyTorch side's only door to the hardware: the kpdr device-runtime ABI
// (csrc/runtime/kpdr.h), loaded with dlopen. Everything in csrc/aten calls the
// runtime through `rt()` and converts its errors with KPDR_CHECK.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <string>

#include "runtime/kpdr.h"

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

} // namespace kernel_pytorch

// Converts a failing runtime call into a c10::Error with the runtime's detail.
#define KPDR_CHECK(expr)                                                     \
  do {                                                                       \
    kpdrError_t kpdr_err__ = (expr);                                         \
    if (C10_UNLIKELY(kpdr_err__ != KPDR_SUCCESS)) {                          \
      ::kernel_pytorch::raise_runtime_error(kpdr_err__, #expr, __FILE__, __LINE__); \
    }                                                                        \
  } while (0)
