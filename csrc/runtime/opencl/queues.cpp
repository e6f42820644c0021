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

Stream::~Stream() {
  if (last_ != nullptr) cl_->ReleaseEvent(last_);
  cl_->Finish(queue_);
  if (workspace_ != nullptr) cl_->ReleaseMemObject(workspace_);
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

kpdrError_t Stream::finish_submit_locked(const char* what, cl_int status, cl_event event) {
  if (status != CL_SUCCESS) {
    if (event != nullptr) cl_->ReleaseEvent(event);
    return command_failed(what, status);
  }
  if (event != nullptr) {
    if (last_ != nullptr) cl_->ReleaseEvent(last_);
    last_ = event;
  }
  cl_->Flush(queue_);
  return KPDR_SUCCESS;
}

kpdrError_t Stream::record(cl_event* marker) {
  std::lock_guard<std::mutex> lock(mutex_);
  cl_event event = nullptr;
  const cl_int status = cl_->EnqueueMarkerWithWaitList(queue_, 0, nullptr, &event);
  if (status != CL_SUCCESS) return command_failed("kpdrEventRecord", status);
  cl_->RetainEvent(event);  // one reference for the stream, one for the caller
  if (kpdrError_t error = finish_submit_locked("kpdrEventRecord", CL_SUCCESS, event)) {
    cl_->ReleaseEvent(event);
    return error;
  }
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
  if (last_ == nullptr) return KPDR_SUCCESS;
  cl_int state = CL_COMPLETE;
  const cl_int status =
      cl_->GetEventInfo(last_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr);
  if (status != CL_SUCCESS) return command_failed("kpdrStreamQuery", status);
  if (state < 0) return command_failed("kpdrStreamQuery (a command of this stream)", state);
  if (state != CL_COMPLETE) return KPDR_ERROR_NOT_READY;
  cl_->ReleaseEvent(last_);  // idle: later queries need no driver call
  last_ = nullptr;
  return KPDR_SUCCESS;
}

kpdrError_t Stream::synchronize() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (last_ == nullptr) return KPDR_SUCCESS;
  }
  // Not under the lock: other threads may keep submitting meanwhile.
  const cl_int status = cl_->Finish(queue_);
  if (status != CL_SUCCESS) return command_failed("kpdrStreamSynchronize", status);
  const kpdrError_t state = query();
  return state == KPDR_ERROR_NOT_READY ? KPDR_SUCCESS : state;  // newer work, submitted since
}

Event::~Event() {
  if (marker_ != nullptr) cl_->ReleaseEvent(marker_);
}

kpdrError_t Event::record(Stream& stream) {
  cl_event marker = nullptr;
  if (kpdrError_t error = stream.record(&marker)) return error;
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
