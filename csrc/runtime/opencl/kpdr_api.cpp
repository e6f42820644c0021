// The exported kpdr C ABI (csrc/runtime/kpdr.h) of the OpenCL runtime:
// argument checks and the mapping of each call to OpenCL. No C++ exception
// may cross this boundary.
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "errors.h"
#include "kpdr.h"
#include "runtime.h"

using namespace kpdr_opencl;

namespace {

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
  return fail(KPDR_ERROR_INVALID_VALUE, std::string(api) + ": " + argument + " is NULL; pass a valid pointer");
}

kpdrError_t find_stream(Runtime& runtime, kpdrStream_t handle, const char* api,
                        std::shared_ptr<Stream>* stream) {
  if (handle == nullptr) return null_argument(api, "stream");
  *stream = runtime.streams().find(handle);
  if (*stream == nullptr) {
    return fail(KPDR_ERROR_INVALID_HANDLE, std::string(api) + ": unknown stream handle (destroyed, or "
                                                              "not from kpdrStreamCreate of this runtime)");
  }
  return KPDR_SUCCESS;
}

kpdrError_t find_event(Runtime& runtime, kpdrEvent_t handle, const char* api,
                       std::shared_ptr<Event>* event) {
  if (handle == nullptr) return null_argument(api, "event");
  *event = runtime.events().find(handle);
  if (*event == nullptr) {
    return fail(KPDR_ERROR_INVALID_HANDLE, std::string(api) + ": unknown event handle (destroyed, or "
                                                              "not from kpdrEventCreate of this runtime)");
  }
  return KPDR_SUCCESS;
}

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

const char* kind_name(kpdrMemcpyKind kind) {
  switch (kind) {
    case KPDR_MEMCPY_HOST_TO_DEVICE: return "HOST_TO_DEVICE";
    case KPDR_MEMCPY_DEVICE_TO_HOST: return "DEVICE_TO_HOST";
    case KPDR_MEMCPY_DEVICE_TO_DEVICE: return "DEVICE_TO_DEVICE";
  }
  return "?";
}

// The device side of a copy: inside a live allocation, `size` bytes long.
kpdrError_t device_side(Runtime& runtime, const void* ptr, size_t size, kpdrMemcpyKind kind,
                        const char* role, DeviceRange* range) {
  if (!runtime.device_memory().find(ptr, range)) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the " + role + " " +
                    pointer_text(ptr) +
                    " is not inside any live device allocation; pass memory from kpdrMalloc or fix "
                    "the copy kind");
  }
  if (size > range->available()) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": copying " + std::to_string(size) +
                    " bytes at " + role + " " + pointer_text(ptr) + " runs past the end of its " +
                    std::to_string(range->allocation->size) + "-byte allocation (" +
                    std::to_string(range->available()) + " bytes left from there)");
  }
  return KPDR_SUCCESS;
}

// The host side of a copy must not be device memory (that is a kind mix-up).
kpdrError_t host_side(Runtime& runtime, const void* ptr, kpdrMemcpyKind kind, const char* role) {
  DeviceRange range;
  if (ptr == nullptr) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the " + role + " is NULL");
  }
  if (runtime.device_memory().find(ptr, &range)) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the " + role + " " +
                    pointer_text(ptr) + " is device memory; use KPDR_MEMCPY_DEVICE_TO_DEVICE");
  }
  return KPDR_SUCCESS;
}

kpdrError_t on_stream_device(const Stream& stream, int device, kpdrMemcpyKind kind) {
  if (stream.device() == device) return KPDR_SUCCESS;
  return fail(KPDR_ERROR_INVALID_VALUE,
              std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the device memory is on device " +
                  std::to_string(device) + " but the stream belongs to device " +
                  std::to_string(stream.device()) + "; enqueue on a stream of that device");
}

}  // namespace

extern "C" {

KPDR_API uint32_t kpdrGetAbiVersion(void) { return KPDR_ABI_VERSION; }

KPDR_API kpdrError_t kpdrInit(const char* options) {
  try {
    return Runtime::initialize(options);
  } catch (const std::exception& error) {
    return fail(KPDR_ERROR_UNKNOWN, std::string("kpdrInit: internal error: ") + error.what());
  }
}

KPDR_API const char* kpdrGetErrorString(kpdrError_t error) { return error_string(error); }

KPDR_API const char* kpdrGetLastErrorMessage(void) { return last_error_message(); }

KPDR_API kpdrError_t kpdrGetDeviceCount(int* count) {
  return with_runtime("kpdrGetDeviceCount", [&](Runtime& runtime) {
    if (count == nullptr) return null_argument("kpdrGetDeviceCount", "count");
    *count = runtime.device_count();
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrGetDeviceProperties(int device, kpdrDeviceProperties* props) {
  return with_runtime("kpdrGetDeviceProperties", [&](Runtime& runtime) {
    if (props == nullptr) return null_argument("kpdrGetDeviceProperties", "props");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    const Device& d = runtime.device(device);
    std::memset(props, 0, sizeof(*props));
    std::memcpy(props->name, d.name.c_str(), d.name.size() + 1);  // at most 255 bytes, checked at init
    props->total_memory = d.capacity;
    props->compute_units = d.compute_units;
    // Buffers are reachable only through copies (map/unmap aside), and the
    // pointers handed out are not host addresses: never host addressable.
    props->host_addressable = 0;
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrDeviceSynchronize(int device) {
  return with_runtime("kpdrDeviceSynchronize", [&](Runtime& runtime) {
    if (kpdrError_t error = runtime.check_device(device)) return error;
    return runtime.synchronize_device(device);
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
  return with_runtime("kpdrFreeHost", [&](Runtime& runtime) { return runtime.pinned_host_memory().release(ptr); });
}

KPDR_API kpdrError_t kpdrPointerGetDevice(const void* ptr, int* device) {
  return with_runtime("kpdrPointerGetDevice", [&](Runtime& runtime) {
    if (device == nullptr) return null_argument("kpdrPointerGetDevice", "device");
    DeviceRange range;
    if (runtime.device_memory().find(ptr, &range)) {
      *device = range.allocation->device;
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

KPDR_API kpdrError_t kpdrMemcpyAsync(void* dst, const void* src, size_t size, kpdrMemcpyKind kind,
                                     kpdrStream_t stream) {
  // A C caller may pass any int: read it as one (loading an out-of-range value
  // as the enum is undefined behaviour, which a compiler may use to drop the
  // check below), and switch on the enum only once it is known.
  int raw_kind = 0;
  static_assert(sizeof(raw_kind) == sizeof(kind), "kpdrMemcpyKind is an int-sized C enum");
  std::memcpy(&raw_kind, &kind, sizeof(raw_kind));
  if (raw_kind < KPDR_MEMCPY_HOST_TO_DEVICE || raw_kind > KPDR_MEMCPY_DEVICE_TO_DEVICE) {
    return fail(KPDR_ERROR_INVALID_VALUE, "kpdrMemcpyAsync: kind=" + std::to_string(raw_kind) +
                                              " is not a kpdrMemcpyKind; use HOST_TO_DEVICE (1), DEVICE_TO_HOST (2) or "
                                              "DEVICE_TO_DEVICE (3)");
  }
  return with_runtime("kpdrMemcpyAsync", [&](Runtime& runtime) {
    std::shared_ptr<Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrMemcpyAsync", &target)) return error;
    const ClApi& cl = runtime.cl();
    DeviceRange to, from;
    switch (kind) {
      case KPDR_MEMCPY_HOST_TO_DEVICE: {
        if (size == 0) return KPDR_SUCCESS;
        if (kpdrError_t e = device_side(runtime, dst, size, kind, "destination", &to)) return e;
        if (kpdrError_t e = host_side(runtime, src, kind, "source")) return e;
        if (kpdrError_t e = on_stream_device(*target, to.allocation->device, kind)) return e;
        return target->submit("kpdrMemcpyAsync", [&](cl_command_queue queue, cl_event* done) {
          return cl.EnqueueWriteBuffer(queue, to.allocation->mem, CL_FALSE, to.offset, size, src, 0,
                                       nullptr, done);
        });
      }
      case KPDR_MEMCPY_DEVICE_TO_HOST: {
        if (size == 0) return KPDR_SUCCESS;
        if (kpdrError_t e = device_side(runtime, src, size, kind, "source", &from)) return e;
        if (kpdrError_t e = host_side(runtime, dst, kind, "destination")) return e;
        if (kpdrError_t e = on_stream_device(*target, from.allocation->device, kind)) return e;
        return target->submit("kpdrMemcpyAsync", [&](cl_command_queue queue, cl_event* done) {
          return cl.EnqueueReadBuffer(queue, from.allocation->mem, CL_FALSE, from.offset, size, dst,
                                      0, nullptr, done);
        });
      }
      case KPDR_MEMCPY_DEVICE_TO_DEVICE: {
        if (size == 0) return KPDR_SUCCESS;
        if (kpdrError_t e = device_side(runtime, dst, size, kind, "destination", &to)) return e;
        if (kpdrError_t e = device_side(runtime, src, size, kind, "source", &from)) return e;
        if (target->device() != to.allocation->device && target->device() != from.allocation->device) {
          return fail(KPDR_ERROR_INVALID_VALUE,
                      "kpdrMemcpyAsync DEVICE_TO_DEVICE: the stream belongs to device " +
                          std::to_string(target->device()) + " but the copy runs between devices " +
                          std::to_string(from.allocation->device) + " and " +
                          std::to_string(to.allocation->device) + "; use a stream of either");
        }
        if (dst == src) return KPDR_SUCCESS;
        const bool overlap = to.allocation == from.allocation &&
                             to.offset < from.offset + size && from.offset < to.offset + size;
        if (!overlap) {
          return target->submit("kpdrMemcpyAsync", [&](cl_command_queue queue, cl_event* done) {
            return cl.EnqueueCopyBuffer(queue, from.allocation->mem, to.allocation->mem, from.offset,
                                        to.offset, size, 0, nullptr, done);
          });
        }
        // clEnqueueCopyBuffer refuses overlapping ranges (CL_MEM_COPY_OVERLAP):
        // memmove semantics through a scratch buffer, released once enqueued
        // (OpenCL keeps it until both copies ran).
        cl_int status = CL_SUCCESS;
        cl_mem scratch = cl.CreateBuffer(runtime.context(), CL_MEM_READ_WRITE, size, nullptr, &status);
        if (scratch == nullptr || status != CL_SUCCESS) {
          return fail(KPDR_ERROR_OUT_OF_MEMORY, "kpdrMemcpyAsync: an overlapping device copy needs a "
                                                "scratch buffer of " + bytes_text(size) + ", which "
                                                "failed (" + cl_error_name(status) + ")");
        }
        kpdrError_t error = target->submit("kpdrMemcpyAsync", [&](cl_command_queue queue, cl_event* done) {
          return cl.EnqueueCopyBuffer(queue, from.allocation->mem, scratch, from.offset, 0, size, 0,
                                      nullptr, done);
        });
        if (error == KPDR_SUCCESS) {
          error = target->submit("kpdrMemcpyAsync", [&](cl_command_queue queue, cl_event* done) {
            return cl.EnqueueCopyBuffer(queue, scratch, to.allocation->mem, 0, to.offset, size, 0,
                                        nullptr, done);
          });
        }
        cl.ReleaseMemObject(scratch);
        return error;
      }
    }
    return fail(KPDR_ERROR_INVALID_VALUE,
                "kpdrMemcpyAsync: kind " + std::to_string(static_cast<int>(kind)) +
                    " is not a kpdrMemcpyKind; use HOST_TO_DEVICE (1), DEVICE_TO_HOST (2) or "
                    "DEVICE_TO_DEVICE (3)");
  });
}

KPDR_API kpdrError_t kpdrStreamCreate(int device, int priority, kpdrStream_t* stream) {
  (void)priority;  // a hint (kpdr.h); OpenCL 1.2-3.0 queues have no portable priority
  return with_runtime("kpdrStreamCreate", [&](Runtime& runtime) {
    if (stream == nullptr) return null_argument("kpdrStreamCreate", "stream");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    return runtime.create_stream(device, stream);
  });
}

KPDR_API kpdrError_t kpdrStreamDestroy(kpdrStream_t stream) {
  return with_runtime("kpdrStreamDestroy", [&](Runtime& runtime) {
    if (stream == nullptr) return null_argument("kpdrStreamDestroy", "stream");
    if (runtime.streams().remove(stream) == nullptr) {
      return fail(KPDR_ERROR_INVALID_HANDLE, "kpdrStreamDestroy: unknown stream handle (already destroyed?)");
    }
    return KPDR_SUCCESS;  // ~Stream finishes the queue's work, then releases it
  });
}

KPDR_API kpdrError_t kpdrStreamSynchronize(kpdrStream_t stream) {
  return with_runtime("kpdrStreamSynchronize", [&](Runtime& runtime) {
    std::shared_ptr<Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrStreamSynchronize", &target)) return error;
    return target->synchronize();
  });
}

KPDR_API kpdrError_t kpdrStreamQuery(kpdrStream_t stream) {
  return with_runtime("kpdrStreamQuery", [&](Runtime& runtime) {
    std::shared_ptr<Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrStreamQuery", &target)) return error;
    return target->query();
  });
}

KPDR_API kpdrError_t kpdrStreamWaitEvent(kpdrStream_t stream, kpdrEvent_t event) {
  return with_runtime("kpdrStreamWaitEvent", [&](Runtime& runtime) {
    std::shared_ptr<Stream> target;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrStreamWaitEvent", &target)) return error;
    std::shared_ptr<Event> source;
    if (kpdrError_t error = find_event(runtime, event, "kpdrStreamWaitEvent", &source)) return error;
    // The recording current now; re-recording later does not change what is waited for.
    cl_event marker = source->latest();
    if (marker == nullptr) return KPDR_SUCCESS;
    const kpdrError_t error = target->wait_for(marker);
    runtime.cl().ReleaseEvent(marker);
    return error;
  });
}

KPDR_API kpdrError_t kpdrEventCreate(int device, unsigned int flags, kpdrEvent_t* event) {
  return with_runtime("kpdrEventCreate", [&](Runtime& runtime) {
    if (event == nullptr) return null_argument("kpdrEventCreate", "event");
    if (kpdrError_t error = runtime.check_device(device)) return error;
    if ((flags & ~KPDR_EVENT_DISABLE_TIMING) != 0) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventCreate: flags=" + std::to_string(flags) +
                      " has unknown bits; use KPDR_EVENT_DEFAULT or KPDR_EVENT_DISABLE_TIMING");
    }
    *event = runtime.events().add(std::make_shared<Event>(&runtime.cl(), device, flags));
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrEventDestroy(kpdrEvent_t event) {
  return with_runtime("kpdrEventDestroy", [&](Runtime& runtime) {
    if (event == nullptr) return null_argument("kpdrEventDestroy", "event");
    // Queued waits hold their own reference to the marker (OpenCL refcounts).
    if (runtime.events().remove(event) == nullptr) {
      return fail(KPDR_ERROR_INVALID_HANDLE, "kpdrEventDestroy: unknown event handle (already destroyed?)");
    }
    return KPDR_SUCCESS;
  });
}

KPDR_API kpdrError_t kpdrEventRecord(kpdrEvent_t event, kpdrStream_t stream) {
  return with_runtime("kpdrEventRecord", [&](Runtime& runtime) {
    std::shared_ptr<Event> target;
    if (kpdrError_t error = find_event(runtime, event, "kpdrEventRecord", &target)) return error;
    std::shared_ptr<Stream> source;
    if (kpdrError_t error = find_stream(runtime, stream, "kpdrEventRecord", &source)) return error;
    if (target->device() != source->device()) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventRecord: the event belongs to device " + std::to_string(target->device()) +
                      " but the stream to device " + std::to_string(source->device()) +
                      "; record on a stream of the event's device");
    }
    return target->record(*source);
  });
}

KPDR_API kpdrError_t kpdrEventQuery(kpdrEvent_t event) {
  return with_runtime("kpdrEventQuery", [&](Runtime& runtime) {
    std::shared_ptr<Event> target;
    if (kpdrError_t error = find_event(runtime, event, "kpdrEventQuery", &target)) return error;
    return target->query();
  });
}

KPDR_API kpdrError_t kpdrEventSynchronize(kpdrEvent_t event) {
  return with_runtime("kpdrEventSynchronize", [&](Runtime& runtime) {
    std::shared_ptr<Event> target;
    if (kpdrError_t error = find_event(runtime, event, "kpdrEventSynchronize", &target)) return error;
    return target->synchronize();
  });
}

KPDR_API kpdrError_t kpdrEventElapsedTime(float* ms, kpdrEvent_t start, kpdrEvent_t end) {
  return with_runtime("kpdrEventElapsedTime", [&](Runtime& runtime) {
    if (ms == nullptr) return null_argument("kpdrEventElapsedTime", "ms");
    std::shared_ptr<Event> first, last;
    if (kpdrError_t error = find_event(runtime, start, "kpdrEventElapsedTime", &first)) return error;
    if (kpdrError_t error = find_event(runtime, end, "kpdrEventElapsedTime", &last)) return error;
    if (!first->timing_enabled() || !last->timing_enabled()) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventElapsedTime: an event was created with KPDR_EVENT_DISABLE_TIMING; "
                  "create both events with KPDR_EVENT_DEFAULT to time them");
    }
    cl_event a = first->latest(), b = last->latest();
    if (a == nullptr || b == nullptr) {
      if (a) runtime.cl().ReleaseEvent(a);
      if (b) runtime.cl().ReleaseEvent(b);
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrEventElapsedTime: an event was never recorded; call kpdrEventRecord on both "
                  "events first");
    }
    runtime.cl().ReleaseEvent(a);
    runtime.cl().ReleaseEvent(b);
    for (const auto* e : {first.get(), last.get()}) {
      const kpdrError_t state = e->query();
      if (state != KPDR_SUCCESS) return state;  // NOT_READY, or the work failed
    }
    unsigned long long t0 = 0, t1 = 0;
    if (kpdrError_t error = first->end_time(&t0)) return error;
    if (kpdrError_t error = last->end_time(&t1)) return error;
    *ms = static_cast<float>((static_cast<double>(t1) - static_cast<double>(t0)) / 1e6);
    return KPDR_SUCCESS;
  });
}

}  // extern "C"
