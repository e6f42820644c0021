#include "queues.h"

#include <string>

#include "errors.h"

namespace kpdr_opencl {

kpdrError_t command_failed(const char* what, cl_int status) {
  if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE) {
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                std::string(what) + ": the OpenCL driver could not back a buffer with device "
                                    "memory (" + cl_error_name(status) +
                    "); free tensors or use smaller batches");
  }
  return fail(KPDR_ERROR_UNKNOWN, std::string(what) + ": OpenCL reported " +
                                       cl_error_name(status) +
                                       "; the device or driver failed the command");
}

kpdrError_t create_queue(const ClApi* cl, cl_context context, cl_device_id device, bool profiling,
                         cl_command_queue* queue) {
  cl_int status = CL_SUCCESS;
  const cl_command_queue_properties flags = profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
  if (cl->CreateCommandQueueWithProperties != nullptr) {
    const cl_queue_properties properties[] = {CL_QUEUE_PROPERTIES, flags, 0};
    *queue = cl->CreateCommandQueueWithProperties(context, device, properties, &status);
  } else {
    *queue = cl->CreateCommandQueue(context, device, flags, &status);
  }
  if (*queue == nullptr || status != CL_SUCCESS) {
    *queue = nullptr;
    return fail(status == CL_OUT_OF_HOST_MEMORY || status == CL_OUT_OF_RESOURCES ? KPDR_ERROR_OUT_OF_MEMORY
                                                                                 : KPDR_ERROR_UNKNOWN,
                "clCreateCommandQueue failed with " + cl_error_name(status) + "; destroy unused streams");
  }
  return KPDR_SUCCESS;
}

Stream::~Stream() {
  if (marker_ != nullptr) cl_->ReleaseEvent(marker_);
  cl_->Finish(queue_);
  if (workspace_ != nullptr) cl_->ReleaseMemObject(workspace_);
  if (counters_ != nullptr) cl_->ReleaseMemObject(counters_);
  cl_->ReleaseCommandQueue(queue_);
}

cl_mem Stream::borrow_workspace(size_t bytes) {
  std::lock_guard<std::mutex> lock(workspace_mutex_);
  if (workspace_ == nullptr || workspace_bytes_ < bytes) return nullptr;
  cl_mem mem = workspace_;
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  return mem;
}

void Stream::return_workspace(cl_mem mem, size_t bytes) {
  std::lock_guard<std::mutex> lock(workspace_mutex_);
  if (workspace_ != nullptr && workspace_bytes_ >= bytes) {
    cl_->ReleaseMemObject(mem);  // OpenCL frees it once the kernels using it ran
    return;
  }
  if (workspace_ != nullptr) cl_->ReleaseMemObject(workspace_);
  workspace_ = mem;
  workspace_bytes_ = bytes;
}

kpdrError_t Stream::counters(cl_mem* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (counters_ == nullptr) {
    static const cl_uint zeros[kCounters] = {};  // the host side of the write outlives it
    cl_int status = CL_SUCCESS;
    cl_mem mem = cl_->CreateBuffer(context_, CL_MEM_READ_WRITE, sizeof(zeros), nullptr, &status);
    if (mem == nullptr || status != CL_SUCCESS) {
      return fail(KPDR_ERROR_OUT_OF_MEMORY, "a stream's work-group counters (" + bytes_text(sizeof(zeros)) +
                                                ") could not be allocated (" + cl_error_name(status) + ")");
    }
    status = cl_->EnqueueWriteBuffer(queue_, mem, CL_FALSE, 0, sizeof(zeros), zeros, 0, nullptr, nullptr);
    if (kpdrError_t error = finish_submit_locked("zeroing a stream's work-group counters", status)) {
      cl_->ReleaseMemObject(mem);
      return error;
    }
    counters_ = mem;
  }
  *out = counters_;
  return KPDR_SUCCESS;
}

kpdrError_t Stream::finish_submit_locked(const char* what, cl_int status) {
  if (status != CL_SUCCESS) return command_failed(what, status);
  const bool was_idle = done_ == submitted_;
  ++submitted_;
  if (was_idle || ++unflushed_ >= kFlushInterval) {
    cl_->Flush(queue_);
    unflushed_ = 0;
  }
  return KPDR_SUCCESS;
}

kpdrError_t Stream::marker_locked(const char* what, bool fresh, cl_event* marker) {
  if (fresh || marker_ == nullptr || marker_covers_ != submitted_) {
    cl_event event = nullptr;
    const cl_int status = cl_->EnqueueMarkerWithWaitList(queue_, 0, nullptr, &event);
    if (status != CL_SUCCESS) return command_failed(what, status);
    // Flushed: another queue may wait on it, and a host polling it sees progress.
    cl_->Flush(queue_);
    unflushed_ = 0;
    if (marker_ != nullptr) cl_->ReleaseEvent(marker_);
    marker_ = event;
    marker_covers_ = submitted_;
  }
  *marker = marker_;
  return KPDR_SUCCESS;
}

kpdrError_t Stream::start_profiling_locked() {
  cl_command_queue profiled = nullptr;
  if (kpdrError_t error = create_queue(cl_, context_, device_id_, true, &profiled)) return error;
  cl_event last = nullptr;
  cl_int status = cl_->EnqueueMarkerWithWaitList(queue_, 0, nullptr, &last);
  if (status == CL_SUCCESS) status = cl_->Flush(queue_);  // another queue waits on `last`
  if (status == CL_SUCCESS) status = cl_->EnqueueBarrierWithWaitList(profiled, 1, &last, nullptr);
  if (last != nullptr) cl_->ReleaseEvent(last);
  if (status != CL_SUCCESS) {
    cl_->ReleaseCommandQueue(profiled);
    return command_failed("kpdrEventRecord (moving the stream to a profiling queue)", status);
  }
  cl_->ReleaseCommandQueue(queue_);  // OpenCL deletes it once its commands ran
  queue_ = profiled;
  profiling_ = true;
  ++submitted_;  // the barrier; the marker enqueued next flushes it
  ++unflushed_;
  return KPDR_SUCCESS;
}

kpdrError_t Stream::record(cl_event* marker, bool timing) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (timing && !profiling_) {
    if (kpdrError_t error = start_profiling_locked()) return error;
  }
  cl_event event = nullptr;
  if (kpdrError_t error = marker_locked("kpdrEventRecord", true, &event)) return error;
  cl_->RetainEvent(event);  // one reference for the stream, one for the caller
  *marker = event;
  return KPDR_SUCCESS;
}

kpdrError_t Stream::wait_for(cl_event event) {
  return submit("kpdrStreamWaitEvent", [&](cl_command_queue queue, cl_event* done) {
    return cl_->EnqueueBarrierWithWaitList(queue, 1, &event, done);
  });
}

kpdrError_t Stream::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ == submitted_) return KPDR_SUCCESS;  // idle: no driver call
  cl_event marker = nullptr;
  if (kpdrError_t error = marker_locked("kpdrStreamQuery", false, &marker)) return error;
  cl_int state = CL_COMPLETE;
  const cl_int status =
      cl_->GetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr);
  if (status != CL_SUCCESS) return command_failed("kpdrStreamQuery", status);
  if (state < 0) return command_failed("kpdrStreamQuery (a command of this stream)", state);
  if (state != CL_COMPLETE) return KPDR_ERROR_NOT_READY;
  if (marker_covers_ > done_) done_ = marker_covers_;
  cl_->ReleaseEvent(marker_);
  marker_ = nullptr;
  return KPDR_SUCCESS;
}

kpdrError_t Stream::synchronize() {
  uint64_t target = 0;
  cl_command_queue queue = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ == submitted_) return KPDR_SUCCESS;
    target = submitted_;
    queue = queue_;
    cl_->RetainCommandQueue(queue);  // a recording may replace queue_ meanwhile
  }
  // Not under the lock: other threads may keep submitting meanwhile.
  const cl_int status = cl_->Finish(queue);
  cl_->ReleaseCommandQueue(queue);
  if (status != CL_SUCCESS) return command_failed("kpdrStreamSynchronize", status);
  std::lock_guard<std::mutex> lock(mutex_);
  if (marker_ != nullptr && marker_covers_ <= target) {
    // A failed command shows in the markers after it (clFinish may not say).
    cl_int state = CL_COMPLETE;
    cl_->GetEventInfo(marker_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr);
    cl_->ReleaseEvent(marker_);
    marker_ = nullptr;
    if (state < 0) return command_failed("kpdrStreamSynchronize (a command of this stream)", state);
  }
  if (target > done_) done_ = target;
  return KPDR_SUCCESS;
}

Event::~Event() {
  if (marker_ != nullptr) cl_->ReleaseEvent(marker_);
}

kpdrError_t Event::record(Stream& stream) {
  cl_event marker = nullptr;
  if (kpdrError_t error = stream.record(&marker, timing_enabled())) return error;
  std::lock_guard<std::mutex> lock(mutex_);
  if (marker_ != nullptr) cl_->ReleaseEvent(marker_);
  marker_ = marker;
  return KPDR_SUCCESS;
}

cl_event Event::latest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (marker_ != nullptr) cl_->RetainEvent(marker_);
  return marker_;
}

kpdrError_t Event::query() const {
  cl_event marker = latest();
  if (marker == nullptr) return KPDR_SUCCESS;
  cl_int state = CL_COMPLETE;
  const cl_int status =
      cl_->GetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr);
  cl_->ReleaseEvent(marker);
  if (status != CL_SUCCESS) return command_failed("kpdrEventQuery", status);
  if (state < 0) return command_failed("kpdrEventQuery (the recorded work)", state);
  return state == CL_COMPLETE ? KPDR_SUCCESS : KPDR_ERROR_NOT_READY;
}

kpdrError_t Event::synchronize() const {
  cl_event marker = latest();
  if (marker == nullptr) return KPDR_SUCCESS;
  const cl_int status = cl_->WaitForEvents(1, &marker);
  cl_->ReleaseEvent(marker);
  if (status != CL_SUCCESS) return command_failed("kpdrEventSynchronize", status);
  return KPDR_SUCCESS;
}

kpdrError_t Event::end_time(unsigned long long* ns) const {
  cl_event marker = latest();
  if (marker == nullptr) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                "kpdrEventElapsedTime: an event was never recorded; call kpdrEventRecord on "
                "both events first");
  }
  cl_ulong end = 0;
  const cl_int status =
      cl_->GetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr);
  cl_->ReleaseEvent(marker);
  if (status != CL_SUCCESS) {
    return fail(KPDR_ERROR_UNKNOWN, "kpdrEventElapsedTime: the OpenCL driver gave no timestamp "
                                    "for the marker (" + cl_error_name(status) + ")");
  }
  *ns = end;
  return KPDR_SUCCESS;
}

}  // namespace kpdr_opencl
