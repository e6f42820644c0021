// Streams of the my_asic devices, as c10::Stream values.
//
// Like CUDA, each device has one default stream (id 0) and fixed pools of
// streams handed out round-robin (ids 1..kPoolSize for normal priority,
// kPoolSize+1..2*kPoolSize for high priority), created lazily on first use.
// The current stream is per thread and per device.
#pragma once

#include <c10/core/Stream.h>

#include <string>

#include "device_activity.h"
#include "runtime.h"

namespace kernel_pytorch {

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

} // namespace kernel_pytorch
