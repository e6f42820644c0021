// Streams are in-order OpenCL command queues; events are markers.
#pragma once

#include <memory>
#include <mutex>

#include "cl_api.h"
#include "kpdr.h"

namespace kpdr_opencl {

// An in-order command queue. Commands are enqueued
// without an event of their own: creating, handing back and releasing a
// cl_event per launch, and flushing after each one, cost the host more than
// small kernels take on a GPU. The stream counts what it submitted instead;
// a marker (clEnqueueMarkerWithWaitList, with an event) is made only where
// someone asks about the work: kpdrEventRecord, and kpdrStreamQuery while
// work is outstanding. The queue is flushed at those markers (other queues
// may then wait on them, as OpenCL requires), at the first command after
// the stream was seen idle (so the device starts at once), and every
// kFlushInterval commands (so a long burst of launches does not sit in the
// driver); clFinish flushes the rest at kpdrStreamSynchronize.
//
// Profiling (CL_QUEUE_PROFILING_ENABLE: the driver timestamps every command)
// is only needed by kpdrEventElapsedTime, whose events take timestamps from
// their markers. Queues start without it (runtime option profiling=auto); the
// first recording of a timing event on a stream moves the stream to a new,
// profiling queue whose work waits for the old queue's (a barrier on a marker
// of it), so the stream stays in order. profiling=always makes every queue
// profile from the start.
class Stream {
 public:
  Stream(const ClApi* cl, cl_context context, int device, cl_device_id device_id, bool profiling,
         cl_command_queue queue)
      : cl_(cl), context_(context), device_(device), device_id_(device_id), queue_(queue), profiling_(profiling) {}
  ~Stream();
  int device() const { return device_; }

  // Commands enqueued between two flushes at most.
  static constexpr unsigned kFlushInterval = 16;

  // Runs `enqueue(queue, nullptr)` (the second argument: the event to
  // return, none) under the stream's lock and counts the command. `what`
  // names the call for error messages.
  template <typename Enqueue>
  kpdrError_t submit(const char* what, Enqueue&& enqueue) {
    std::lock_guard<std::mutex> lock(mutex_);
    const cl_int status = enqueue(queue_, static_cast<cl_event*>(nullptr));
    return finish_submit_locked(what, status);
  }
  // Enqueues a marker; *marker (retained for the caller) completes when all
  // work submitted so far has. `timing`: the marker's timestamps will be read
  // (the stream profiles from now on).
  kpdrError_t record(cl_event* marker, bool timing);
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

  // kCounters zeroed uint counters for kernels that count their finished
  // work-groups (the column reduction: the last group of a column block
  // finishes its outputs, no second launch). Created and zeroed on this
  // stream at first use; a kernel returns the counters it used to zero before
  // it ends, and the in-order queue runs one command at a time, so every
  // launch finds them zeroed.
  static constexpr size_t kCounters = 16384;
  kpdrError_t counters(cl_mem* out);

 private:
  kpdrError_t finish_submit_locked(const char* what, cl_int status);
  // A marker covering every command submitted so far, retained by the
  // stream; under mutex_. A new one is enqueued (and flushed) when `fresh`
  // (a recording takes its own timestamp, as on an idle CUDA stream) or when
  // the latest one does not cover every command.
  kpdrError_t marker_locked(const char* what, bool fresh, cl_event* marker);
  // Moves the stream to a new profiling queue (see the class comment); under mutex_.
  kpdrError_t start_profiling_locked();
  const ClApi* cl_;
  cl_context context_;
  int device_;
  cl_device_id device_id_;
  cl_command_queue queue_;  // guarded by mutex_ (replaced once by start_profiling_locked)
  bool profiling_;          // guarded by mutex_
  std::mutex mutex_;
  // Guarded by mutex_: commands submitted, the count of those known to have
  // completed (all of the first `done_`), commands since the last flush, and
  // the latest marker (retained) with the count of commands it covers.
  uint64_t submitted_ = 0;
  uint64_t done_ = 0;
  unsigned unflushed_ = 0;
  cl_event marker_ = nullptr;
  uint64_t marker_covers_ = 0;
  cl_mem counters_ = nullptr;  // guarded by mutex_
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

// A new in-order queue on `device`, profiling when `profiling`.
kpdrError_t create_queue(const ClApi* cl, cl_context context, cl_device_id device, bool profiling,
                         cl_command_queue* queue);

}  // namespace kpdr_opencl
