#include "device_copy.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>

#include "error_reporting.h"

namespace myasic {
namespace {

struct DelayControl {
  std::mutex mutex;
  std::condition_variable skip_requested;
  bool skipping = false;  // guarded by mutex
};

// Leaked on purpose: used from the exit-time drain, after which other
// translation units' statics may already be destroyed.
DelayControl& delay_control() {
  static DelayControl* control = new DelayControl;
  return *control;
}

std::string pointer_text(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", pointer);
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

// Resolves the device side of a copy; `role` is "destination" or "source".
kpdrError_t resolve_device_range(const DeviceMemory& memory, const void* pointer,
                                 std::size_t size, kpdrMemcpyKind kind, const char* role,
                                 DeviceAllocationView* view) {
  if (!memory.find(pointer, view)) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the " + role + " " +
                    pointer_text(pointer) +
                    " is not inside any live device allocation; pass memory from kpdrMalloc "
                    "or fix the copy kind");
  }
  const std::size_t offset = reinterpret_cast<std::uintptr_t>(pointer) - view->device_base;
  if (size > view->size - offset) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": copying " +
                    std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                    " overruns the " + role + " allocation of " + std::to_string(view->size) +
                    " bytes on device " + std::to_string(view->device));
  }
  return KPDR_SUCCESS;
}

// The host side of a copy must not be device memory: the caller picked the
// wrong kind, and in host_addressable=0 mode it would be dereferenced.
kpdrError_t check_host_range(const DeviceMemory& memory, const void* pointer, std::size_t size,
                             kpdrMemcpyKind kind, const char* role) {
  if (pointer == nullptr) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the host " + role +
                    " is NULL");
  }
  if (reinterpret_cast<std::uintptr_t>(pointer) > UINTPTR_MAX - size) {
    return fail(KPDR_ERROR_INVALID_VALUE, std::string("kpdrMemcpyAsync: the host ") + role +
                                              " range wraps around the address space");
  }
  DeviceAllocationView view;
  if (memory.find(pointer, &view)) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                std::string("kpdrMemcpyAsync ") + kind_name(kind) + ": the " + role + " " +
                    pointer_text(pointer) + " is device memory of device " +
                    std::to_string(view.device) + ", not host memory; use DEVICE_TO_DEVICE");
  }
  return KPDR_SUCCESS;
}

kpdrError_t check_stream_device(int stream_device, int device, const char* role) {
  if (stream_device == device) return KPDR_SUCCESS;
  return fail(KPDR_ERROR_INVALID_VALUE,
              std::string("kpdrMemcpyAsync: the device ") + role + " is on device " +
                  std::to_string(device) + " but the stream belongs to device " +
                  std::to_string(stream_device) + "; enqueue on a stream of device " +
                  std::to_string(device));
}

}  // namespace

kpdrError_t plan_copy(const DeviceMemory& memory, void* dst, const void* src, std::size_t size,
                      int raw_kind, int stream_device, double bandwidth_gbps,
                      CopyPlan* plan) {
  if (raw_kind < KPDR_MEMCPY_HOST_TO_DEVICE || raw_kind > KPDR_MEMCPY_DEVICE_TO_DEVICE) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                "kpdrMemcpyAsync: kind=" + std::to_string(raw_kind) +
                    " is not a kpdrMemcpyKind; use HOST_TO_DEVICE (1), DEVICE_TO_HOST (2) or "
                    "DEVICE_TO_DEVICE (3)");
  }
  const auto kind = static_cast<kpdrMemcpyKind>(raw_kind);  // one of the three, checked above
  *plan = CopyPlan{};
  plan->bytes = size;
  plan->bandwidth_gbps = bandwidth_gbps;
  if (size == 0) return KPDR_SUCCESS;  // nothing to move; pointers may be NULL

  DeviceAllocationView dst_view;
  DeviceAllocationView src_view;
  switch (kind) {
    case KPDR_MEMCPY_HOST_TO_DEVICE:
      if (kpdrError_t error = check_host_range(memory, src, size, kind, "source")) return error;
      if (kpdrError_t error = resolve_device_range(memory, dst, size, kind, "destination", &dst_view))
        return error;
      if (kpdrError_t error = check_stream_device(stream_device, dst_view.device, "destination"))
        return error;
      plan->source = src;
      break;
    case KPDR_MEMCPY_DEVICE_TO_HOST:
      if (kpdrError_t error = check_host_range(memory, dst, size, kind, "destination"))
        return error;
      if (kpdrError_t error = resolve_device_range(memory, src, size, kind, "source", &src_view))
        return error;
      if (kpdrError_t error = check_stream_device(stream_device, src_view.device, "source"))
        return error;
      plan->destination = dst;
      break;
    case KPDR_MEMCPY_DEVICE_TO_DEVICE:
      if (kpdrError_t error = resolve_device_range(memory, dst, size, kind, "destination", &dst_view))
        return error;
      if (kpdrError_t error = resolve_device_range(memory, src, size, kind, "source", &src_view))
        return error;
      if (stream_device != dst_view.device && stream_device != src_view.device) {
        return fail(KPDR_ERROR_INVALID_VALUE,
                    "kpdrMemcpyAsync DEVICE_TO_DEVICE: copy from device " +
                        std::to_string(src_view.device) + " to device " +
                        std::to_string(dst_view.device) + " was enqueued on a stream of device " +
                        std::to_string(stream_device) + "; use a stream of either device");
      }
      break;
  }
  if (dst_view.backing) {
    plan->destination = DeviceMemory::host_address(dst_view, dst);
    plan->destination_backing = std::move(dst_view.backing);
  }
  if (src_view.backing) {
    plan->source = DeviceMemory::host_address(src_view, src);
    plan->source_backing = std::move(src_view.backing);
  }
  return KPDR_SUCCESS;
}

namespace {

// Copies at least this large are split over several threads, as a device
// with several DMA engines would; smaller ones are not worth a thread start.
constexpr std::size_t kParallelCopyBytes = std::size_t{16} << 20;
constexpr unsigned kMaxCopyEngines = 4;

void copy_bytes(void* destination, const void* source, std::size_t bytes) {
  const auto dst = reinterpret_cast<std::uintptr_t>(destination);
  const auto src = reinterpret_cast<std::uintptr_t>(source);
  const bool overlap = dst < src + bytes && src < dst + bytes;
  const unsigned engines = std::min(kMaxCopyEngines, std::max(1u, std::thread::hardware_concurrency()));
  if (overlap || bytes < kParallelCopyBytes || engines < 2) {
    std::memmove(destination, source, bytes);
    return;
  }
  // Chunks on 4 KiB boundaries so no two threads touch one page.
  const std::size_t chunk = ((bytes / engines) + 4095) / 4096 * 4096;
  std::vector<std::thread> helpers;
  for (std::size_t offset = chunk; offset < bytes; offset += chunk) {
    const std::size_t n = std::min(chunk, bytes - offset);
    helpers.emplace_back([=] {
      std::memcpy(static_cast<char*>(destination) + offset, static_cast<const char*>(source) + offset, n);
    });
  }
  std::memcpy(destination, source, std::min(chunk, bytes));
  for (auto& t : helpers) t.join();
}

}  // namespace

void CopyPlan::run() const {
  if (bytes == 0) return;
  if (bandwidth_gbps > 0.0) {
    // The bytes "arrive" at the end of the simulated transfer, so work that
    // wrongly skips waiting for this copy observes the old contents.
    const auto transfer_time = std::chrono::duration<double>(bytes / (bandwidth_gbps * 1e9));
    DelayControl& control = delay_control();
    std::unique_lock<std::mutex> lock(control.mutex);
    control.skip_requested.wait_for(lock, transfer_time, [&] { return control.skipping; });
  }
  copy_bytes(destination, source, bytes);
}

void skip_simulated_transfer_delays() {
  DelayControl& control = delay_control();
  {
    std::lock_guard<std::mutex> lock(control.mutex);
    control.skipping = true;
  }
  control.skip_requested.notify_all();
}

}  // namespace myasic
