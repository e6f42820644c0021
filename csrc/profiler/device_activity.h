// Device activity recording for the PyTorch profiler (Kineto).
//
// While a profiling session with device activities is active
// (torch.profiler.profile(activities=[..., ProfilerActivity.PrivateUse1]),
// profiler_kineto.cpp), every piece of device work the glue starts
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
// Core brackets that work with activity::StreamWork / HostWork (core/core.h);
// this layer records it through the hooks it installs there.
#pragma once

#include <string>
#include <vector>

#include "core/core.h"

namespace kernel_pytorch::activity {

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

} // namespace kernel_pytorch::activity
