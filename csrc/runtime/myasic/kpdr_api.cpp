// The exported kpdr C ABI (csrc/runtime/kpdr.h) of the reference simulator:
// argument checks and dispatch to the runtime's parts. No C++ exception may
// cross this boundary.
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "device_copy.h"
#include "error_reporting.h"
#include "kpdr.h"
#include "runtime.h"

using myasic::fail;
using myasic::Runtime;

namespace {

// Runs `body` with the initialised runtime, turning exceptions (allocation
// failure in bookkeeping, thread errors) into KPDR_ERROR_UNKNOWN.
template <typename Body>
kpdrError_t with_runtime(const char* api, Body&& body) {
  try {
    Runtime* runtime = nullptr;
    if (kpdrError_t error = Runtime::acquire(&runtime)) return error;
    return body(*runtime);
  } catch (const std::bad_alloc&) {
    return fail(KPDR_ERROR_UNKNOWN, std::string(api) + ": host out of memory for bookkeeping");
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string(api) + ": internal error: " + error.what());
  }
}

kpdrError_t null_argument(const char* api, const char* argument) {
  return fail(KPDR_ERROR_INVALID_VALUE,
              std::string(api) + ": " + argument + " is NULL; pass a valid pointer");
}

kpdrError_t find_stream(Runtime& runtime, kpdrStream_t handle, const char* api,
                        std::shared_ptr<myasic::Stream>* stream) {
  if (handle == nullptr) return null_argument(api, "stream");
  *stream = runtime.streams().find(handle);
  if (*stream == nullptr) {
    return fail(KPDR_ERROR_INVALID_HANDLE,
                std::string(api) + ": unknown stream handle (destroyed, or not from "
                                   "kpdrStreamCreate of this runtime)");
  }
  return KPDR_SUCCESS;
}

kpdrError_t find_event(Runtime& runtime, kpdrEvent_t handle, const char* api,
                       std::shared_ptr<myasic::Event>* event) {
  if (handle == nullptr) return null_argument(api, "event");
  *event = runtime.events().find(handle);
  if (*event == nullptr) {
    return fail(KPDR_ERROR_INVALID_HANDLE,
                std::string(api) + ": unknown event handle (destroyed, or not from "
                                   "kpdrEventCreate of this runtime)");
  }
  return KPDR_SUCCESS;
}

}  // namespace

extern "C" {

/* --- version, initialisation, errors ----------------------------------- */

KPDR_API uint32_t kpdrGetAbiVersion(void) { return KPDR_ABI_VERSION; }

KPDR_API kpdrError_t kpdrInit(const char* options) {
  try {
    return Runtime::initialize(options);
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string("kpdrInit: internal error: ") + error.what());
  }
}

KPDR_API const char* kpdrGetErrorString(kpdrError_t error) { return myasic::error_string(error); }

KPDR_API const char* kpdrGetLastErrorMessage(void) { return myasic::last_error_message(); }

/* --- devices ------------------------------------------------------------- */

KPDR_API kpdrError_t kpdrGetDeviceCount(int* count) {
  return with_runtime("kpdrGetDeviceCount", [&](Runtime& runtime) {
    if (count == nullptr) return null_argument("kpdrGetDeviceCount", "count");
    *count = runtime.config().device_count;
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrGetDeviceProperties(int device, kpdrDeviceProperties* props) {
  return with_runtime("kpdrGetDeviceProperties", [&](Runtime& runtime) {
    if (props == nullptr) return null_argument("kpdrGetDeviceProperties", "props");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    const myasic::SimulatorConfig& config = runtime.config();
    std::memset(props, 0, sizeof(*props));
    const std::string& name = config.device_names[device];
    std::memcpy(props->name, name.c_str(), name.size() + 1);  // length checked at init
    props->total_memory = config.memory_bytes_per_device;
    props->compute_units = config.compute_units;
    props->host_addressable = config.host_addressable ? 1 : 0;
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrDeviceSynchronize(int device) {
  return with_runtime("kpdrDeviceSynchronize", [&](Runtime& runtime) {
    if (kpdrError_t error = runtime.check_device(device)) return error;
    runtime.synchronize_device(device);
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes) {
  return with_runtime("kpdrMemGetInfo", [&](Runtime& runtime) {
    if (free_bytes == nullptr) return null_argument("kpdrMemGetInfo", "free_bytes");
    if (total_bytes == nullptr) return null_argument("kpdrMemGetInfo", "total_bytes");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    runtime.device_memory().get_info(device, free_bytes, total_bytes);
    return KPDR_SUCCESS;
  });
}

/* --- memory -------------------------------------------------------------- */

KPDR_API kpdrError_t kpdrMalloc(int device, void** ptr, size_t size) {
  return with_runtime("kpdrMalloc", [&](Runtime& runtime) {
    if (ptr == nullptr) return null_argument("kpdrMalloc", "ptr");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    return runtime.device_memory().allocate(device, size, ptr);
  });
}

KPDR_API kpdrError_t kpdrFree(int device, void* ptr) {
  return with_runtime("kpdrFree", [&](Runtime& runtime) {
    if (kpdrError_t error = runtime.check_device(device)) return error;
    return runtime.device_memory().release(device, ptr);
  });
}

KPDR_API kpdrError_t kpdrMallocHost(void** ptr, size_t size) {
  return with_runtime("kpdrMallocHost", [&](Runtime& runtime) {
    if (ptr == nullptr) return null_argument("kpdrMallocHost", "ptr");
    return runtime.pinned_host_memory().allocate(size, ptr);
  });
}

KPDR_API kpdrError_t kpdrFreeHost(void* ptr) {
  return with_runtime("kpdrFreeHost", [&](Runtime& runtime) {
    return runtime.pinned_host_memory().release(ptr);
  });
}

KPDR_API kpdrError_t kpdrPointerGetDevice(const void* ptr, int* device) {
  return with_runtime("kpdrPointerGetDevice", [&](Runtime& runtime) {
    if (device == nullptr) return null_argument("kpdrPointerGetDevice", "device");
    myasic::DeviceAllocationView view;
    if (runtime.device_memory().find(ptr, &view)) {
      *device = view.device;
      return KPDR_SUCCESS;
    }
    if (runtime.pinned_host_memory().contains(ptr)) {
      *device = -1;
      return KPDR_SUCCESS;
    }
    return fail(KPDR_ERROR_INVALID_HANDLE,
                "kpdrPointerGetDevice: the pointer is not inside any live kpdrMalloc or "
                "kpdrMallocHost allocation");
  });
}

KPDR_API kpdrError_t kpdrMemcpyAsync(void* dst, const void* src, size_t size,
                                     kpdrMemcpyKind kind, kpdrStream_t stream) {
  // A C caller may pass any int: read it as one (loading an out-of-range value
  // as the enum is undefined behaviour); plan_copy names a bad kind.
  int raw_kind = 0;
  static_assert(sizeof(raw_kind) == sizeof(kind), "kpdrMemcpyKind is an int-sized C enum");
  std::memcpy(&raw_kind, &kind, sizeof(raw_kind));
  return with_runtime("kpdrMemcpyAsync", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrMemcpyAsync", &target)) return error;
    myasic::CopyPlan plan;
    if (kpdrError_t error =
            myasic::plan_copy(runtime.device_memory(), dst, src, size, raw_kind, target->device(),
                              runtime.config().copy_bandwidth_gbps, &plan))
      return error;
    if (plan.bytes == 0) return KPDR_SUCCESS;
    return target->enqueue([plan = std::move(plan)] { plan.run(); });
  });
}

/* --- streams ------------------------------------------------------------- */

KPDR_API kpdrError_t kpdrStreamCreate(int device, int priority, kpdrStream_t* stream) {
  return with_runtime("kpdrStreamCreate", [&](Runtime& runtime) {
    if (stream == nullptr) return null_argument("kpdrStreamCreate", "stream");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    *stream = runtime.streams().add(std::make_shared<myasic::Stream>(device, priority));
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrStreamDestroy(kpdrStream_t stream) {
  return with_runtime("kpdrStreamDestroy", [&](Runtime& runtime) {
    if (stream == nullptr) return null_argument("kpdrStreamDestroy", "stream");
    std::shared_ptr<myasic::Stream> removed = runtime.streams().remove(stream);
    if (removed == nullptr) {
      return fail(KPDR_ERROR_INVALID_HANDLE,
                  "kpdrStreamDestroy: unknown stream handle (already destroyed?)");
    }
    removed->shut_down();  // drains pending work first
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrStreamSynchronize(kpdrStream_t stream) {
  return with_runtime("kpdrStreamSynchronize", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrStreamSynchronize", &target))
      return error;
    target->synchronize();
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrStreamQuery(kpdrStream_t stream) {
  return with_runtime("kpdrStreamQuery", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrStreamQuery", &target)) return error;
    return target->is_idle() ? KPDR_SUCCESS : KPDR_ERROR_NOT_READY;
  });
}

KPDR_API kpdrError_t kpdrStreamWaitEvent(kpdrStream_t stream, kpdrEvent_t event) {
  return with_runtime("kpdrStreamWaitEvent", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrStreamWaitEvent", &target))
      return error;
    std::shared_ptr<myasic::Event> source;
    if (kpdrError_t error = find_event(runtime, event, "kpdrStreamWaitEvent", &source))
      return error;
    // Captures the event's current recording; later re-records don't matter.
    std::shared_ptr<myasic::EventMarker> marker = source->latest_record();
    if (marker == nullptr || marker->is_done()) return KPDR_SUCCESS;
    return target->enqueue([marker] { marker->wait(); });
  });
}

/* --- events -------------------------------------------------------------- */

KPDR_API kpdrError_t kpdrEventCreate(int device, unsigned int flags, kpdrEvent_t* event) {
  return with_runtime("kpdrEventCreate", [&](Runtime& runtime) {
    if (event == nullptr) return null_argument("kpdrEventCreate", "event");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    if ((flags & ~KPDR_EVENT_DISABLE_TIMING) != 0) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventCreate: flags=" + std::to_string(flags) +
                      " has unknown bits; use KPDR_EVENT_DEFAULT or KPDR_EVENT_DISABLE_TIMING");
    }
    *event = runtime.events().add(std::make_shared<myasic::Event>(device, flags));
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrEventDestroy(kpdrEvent_t event) {
  return with_runtime("kpdrEventDestroy", [&](Runtime& runtime) {
    if (event == nullptr) return null_argument("kpdrEventDestroy", "event");
    // Pending records and waits hold their own marker, so this never blocks.
    if (runtime.events().remove(event) == nullptr) {
      return fail(KPDR_ERROR_INVALID_HANDLE,
                  "kpdrEventDestroy: unknown event handle (already destroyed?)");
    }
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrEventRecord(kpdrEvent_t event, kpdrStream_t stream) {
  return with_runtime("kpdrEventRecord", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Event> target;
    if (kpdrError_t error = find_event(runtime, event, "kpdrEventRecord", &target)) return error;
    std::shared_ptr<myasic::Stream> source;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrEventRecord", &source))
      return error;
    if (target->device() != source->device()) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventRecord: the event belongs to device " +
                      std::to_string(target->device()) + " but the stream to device " +
                      std::to_string(source->device()) + "; record on a stream of the event's device");
    }
    return source->record(target->begin_record());
  });
}

KPDR_API kpdrError_t kpdrEventQuery(kpdrEvent_t event) {
  return with_runtime("kpdrEventQuery", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Event> target;
    if (kpdrError_t error = find_event(runtime, event, "kpdrEventQuery", &target)) return error;
    std::shared_ptr<myasic::EventMarker> marker = target->latest_record();
    return marker == nullptr || marker->is_done() ? KPDR_SUCCESS : KPDR_ERROR_NOT_READY;
  });
}

KPDR_API kpdrError_t kpdrEventSynchronize(kpdrEvent_t event) {
  return with_runtime("kpdrEventSynchronize", [&](Runtime& runtime) {
    std::shared_ptr<myasic::Event> target;
    if (kpdrError_t error = find_event(runtime, event, "kpdrEventSynchronize", &target))
      return error;
    if (std::shared_ptr<myasic::EventMarker> marker = target->latest_record()) marker->wait();
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrEventElapsedTime(float* ms, kpdrEvent_t start, kpdrEvent_t end) {
  return with_runtime("kpdrEventElapsedTime", [&](Runtime& runtime) {
    if (ms == nullptr) return null_argument("kpdrEventElapsedTime", "ms");
    std::shared_ptr<myasic::Event> start_event;
    std::shared_ptr<myasic::Event> end_event;
    if (kpdrError_t error = find_event(runtime, start, "kpdrEventElapsedTime", &start_event))
      return error;
    if (kpdrError_t error = find_event(runtime, end, "kpdrEventElapsedTime", &end_event))
      return error;
    if (!start_event->timing_enabled() || !end_event->timing_enabled()) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventElapsedTime: an event was created with KPDR_EVENT_DISABLE_TIMING; "
                  "create both events with KPDR_EVENT_DEFAULT to time them");
    }
    std::shared_ptr<myasic::EventMarker> start_marker = start_event->latest_record();
    std::shared_ptr<myasic::EventMarker> end_marker = end_event->latest_record();
    if (start_marker == nullptr || end_marker == nullptr) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventElapsedTime: an event was never recorded; call kpdrEventRecord on "
                  "both events first");
    }
    if (!start_marker->is_done() || !end_marker->is_done()) return KPDR_ERROR_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(end_marker->completed_at() -
                                                   start_marker->completed_at())
              .count();
    return KPDR_SUCCESS;
  });
}

}  // extern "C"
