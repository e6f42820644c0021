// Device activity recording for the PyTorch profiler (Kineto).
//
// While a profiling session with device activities is active
// (torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1]),
// csrc/aten/profiler_kineto.cpp), every piece of device work the glue starts
// is recorded with its stream, its timing and the correlation id of the
// PyTorch op that started it:
//
// - Work submitted to a runtime stream (kpdrMemcpyAsync, the runtime's
//   kernels) is bracketed by a pair of runtime events on that stream
//   (kpdrEventRecord), so it is timed by the runtime as the stream executes
//   it, not by the host thread that queued it. Event times become host
//   timestamps at the end of the session through kpdrEventElapsedTime from an
//   anchor event whose host time is known (see device_activity.cpp).
// - Work the glue runs on the calling thread in stream order (the native
//   kernels of a host-addressable runtime, after waiting for the stream) is
//   timed with the host clock around the kernel.
//
// With no session active every hook is one relaxed atomic load.
#pragma once

#include <c10/core/Stream.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kpdr.h"

namespace kernel_pytorch::activity {

enum class Kind : uint8_t {
  RuntimeKernel, // one of the runtime's kernels (kpdrKernelTable)
  HostKernel, // a native kernel run on device memory by the host thread
  MemcpyHtoD,
  MemcpyDtoH,
  MemcpyDtoD,
};

Kind memcpy_kind(kpdrMemcpyKind kind);

// One piece of device work, with host timestamps (ns, the clock of
// c10::getTime(), i.e. the profiler's) once the session has stopped.
struct Record {
  Kind kind;
  c10::DeviceIndex device;
  c10::StreamId stream;
  std::string name; // the kernel's name (empty for host kernels: named after their op)
  uint64_t bytes; // copies only
  uint64_t correlation; // the PyTorch op's correlation id (0: none)
  int32_t thread; // system thread id of the submitting thread
  int64_t submit_start_ns; // the submitting call on the host thread
  int64_t submit_end_ns;
  int64_t start_ns; // the work on the device
  int64_t end_ns;
};

namespace detail {
extern std::atomic<bool> g_recording;
} // namespace detail

// Whether a session is recording; the only cost of every hook when not.
inline bool recording() noexcept {
  return C10_UNLIKELY(detail::g_recording.load(std::memory_order_relaxed));
}

// Starts recording (waits for every device first, so its anchor events are
// exact). Raises if a session is already recording.
void start();
// Stops recording, waits for the recorded work, and returns it, timed, in
// submission order. Never throws: work that cannot be timed is dropped and
// counted in `errors`.
std::vector<Record> stop(std::vector<std::string>* errors);

// The correlation ids Kineto pushes as PyTorch ops start and end (per thread).
void push_correlation(uint64_t id);
void pop_correlation();

// Brackets one submission to a runtime stream:
//   StreamWork w(kind, name, bytes, stream);  // records the start event
//   ...submit...;
//   w.submitted();                             // records the end event
// A submission that fails (no submitted()) is not recorded.
class StreamWork {
 public:
  StreamWork(Kind kind, const char* name, uint64_t bytes, const c10::Stream& stream) {
    if (recording()) {
      begin(kind, name, bytes, stream);
    }
  }
  void submitted() {
    if (C10_UNLIKELY(slot_ >= 0)) {
      end();
    }
  }
  ~StreamWork();
  StreamWork(const StreamWork&) = delete;
  StreamWork& operator=(const StreamWork&) = delete;

 private:
  void begin(Kind kind, const char* name, uint64_t bytes, const c10::Stream& stream);
  void end();
  int64_t slot_ = -1; // index of its record in the session
  uint64_t generation_ = 0; // of the session that holds the record
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
      begin_slow(kind, bytes, stream, submitted_ns);
    }
  }
  // The work did not run after all (its caller takes another path).
  void dismiss() {
    active_ = false;
  }
  ~HostWork() {
    if (C10_UNLIKELY(active_)) {
      end_slow();
    }
  }
  HostWork(const HostWork&) = delete;
  HostWork& operator=(const HostWork&) = delete;

 private:
  void begin_slow(Kind kind, uint64_t bytes, const c10::Stream& stream, int64_t submitted_ns);
  void end_slow();
  bool active_ = false;
  Kind kind_{};
  uint64_t bytes_ = 0;
  c10::DeviceIndex device_ = 0;
  c10::StreamId stream_ = 0;
  uint64_t correlation_ = 0;
  uint64_t generation_ = 0;
  int64_t submitted_ns_ = 0;
  int64_t start_ns_ = 0;
};

// The name a runtime kernel is recorded under, from its argument struct.
inline const char* kernel_name(const kpdrRmsNormArgs&) { return "rms_norm"; }
inline const char* kernel_name(const kpdrSiluArgs&) { return "silu"; }
inline const char* kernel_name(const kpdrRopeArgs&) { return "rope"; }
inline const char* kernel_name(const kpdrSoftmaxArgs&) { return "softmax"; }
inline const char* kernel_name(const kpdrDecodeAttentionArgs&) { return "decode_attention"; }
inline const char* kernel_name(const kpdrPrefillAttentionArgs&) { return "prefill_attention"; }
inline const char* kernel_name(const kpdrMatmulVecArgs&) { return "matmul_vec"; }

} // namespace kernel_pytorch::activity
