// Streams are in-order OpenCL command queues; events are markers.
#pragma once

#include <memory>
#include <mutex>

#include "cl_api.h"
#include "kpdr.h"

namespace kpdr_opencl {

// An in-order, profiling-enabled command queue. It remembers the event of the
// last command submitted so kpdrStreamQuery is one clGetEventInfo; every
// submission is flushed at once so the device starts it (and so events of
// this queue may be waited on from other queues, which OpenCL requires).
class Stream {
 public:
  Stream(const ClApi* cl, int device, cl_command_queue queue) : cl_(cl), device_(device), queue_(queue) {}
  ~Stream();
  int device() const { return device_; }

  // Runs `enqueue(queue, &event)` under the stream's lock and makes the event
  // the stream's last command. `what` names the call for error messages.
  template <typename Enqueue>
  kpdrError_t submit(const char* what, Enqueue&& enqueue) {
    std::lock_guard<std::mutex> lock(mutex_);
    cl_event event = nullptr;
    const cl_int status = enqueue(queue_, &event);
    return finish_submit_locked(what, status, event);
  }
  // Enqueues a marker; *marker (retained for the caller) completes when all
  // work submitted so far has.
  kpdrError_t record(cl_event* marker);
  // Work submitted after this waits for `event`.
  kpdrError_t wait_for(cl_event event);
  kpdrError_t query();
  kpdrError_t synchronize();

  // Scratch memory for kernels (decode attention's partial results) kept
  // between launches: a buffer created per launch costs the host more than
  // the kernels take on a GPU. borrow_workspace lends the kept buffer to one
  // caller when it holds `bytes` (else nullptr: the caller makes one);
  // return_workspace takes it back once the kernels using it are enqueued
  // (the queue is in order: the next borrower's kernels run after them),
  // keeping the larger of two.
  cl_mem borrow_workspace(size_t bytes);
  void return_workspace(cl_mem mem, size_t bytes);

 private:
  kpdrError_t finish_submit_locked(const char* what, cl_int status, cl_event event);
  const ClApi* cl_;
  int device_;
  cl_command_queue queue_;
  std::mutex mutex_;
  cl_event last_ = nullptr;  // guarded by mutex_; retained
  std::mutex workspace_mutex_;
  cl_mem workspace_ = nullptr;  // guarded by workspace_mutex_
  size_t workspace_bytes_ = 0;
};

// The latest recording of a kpdr event: a marker cl_event, or none.
class Event {
 public:
  Event(const ClApi* cl, int device, unsigned flags) : cl_(cl), device_(device), flags_(flags) {}
  ~Event();
  int device() const { return device_; }
  bool timing_enabled() const { return (flags_ & KPDR_EVENT_DISABLE_TIMING) == 0; }
  kpdrError_t record(Stream& stream);
  // The latest marker, retained for the caller (release it), or nullptr.
  cl_event latest() const;
  kpdrError_t query() const;
  kpdrError_t synchronize() const;
  // Device timestamp (ns) at which the latest recording completed.
  kpdrError_t end_time(unsigned long long* ns) const;

 private:
  const ClApi* cl_;
  int device_;
  unsigned flags_;
  mutable std::mutex mutex_;
  cl_event marker_ = nullptr;  // guarded by mutex_; retained
};

// Maps an OpenCL status of a failed command or call to a kpdr error with a message.
kpdrError_t command_failed(const char* what, cl_int status);

}  // namespace kpdr_opencl
