// The device error handler (error_handler.h).
#include "error_handler.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <mutex>

namespace kernel_pytorch {
namespace {

std::mutex& handler_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

// Shared so a call in flight keeps its handler while another thread replaces it.
std::shared_ptr<DeviceErrorHandler>& handler_slot() {
  static auto* h = new std::shared_ptr<DeviceErrorHandler>();
  return *h;
}

std::atomic<bool> g_installed{false};
thread_local bool t_in_handler = false;

} // namespace

void set_device_error_handler(DeviceErrorHandler handler) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  if (handler) {
    handler_slot() = std::make_shared<DeviceErrorHandler>(std::move(handler));
  } else {
    handler_slot().reset();
  }
  g_installed.store(static_cast<bool>(handler_slot()), std::memory_order_release);
}

bool has_device_error_handler() {
  return g_installed.load(std::memory_order_acquire);
}

bool notify_device_error(const DeviceErrorInfo& info) {
  if (!has_device_error_handler() || t_in_handler) {
    return false;
  }
  std::shared_ptr<DeviceErrorHandler> handler;
  {
    std::lock_guard<std::mutex> lock(handler_mutex());
    handler = handler_slot();
  }
  if (!handler) {
    return false;
  }
  t_in_handler = true;
  bool retry = false;
  try {
    retry = (*handler)(info);
  } catch (const std::exception& e) {
    TORCH_WARN("my_asic: the device error handler raised (ignored; the device error goes on): ", e.what());
  }
  t_in_handler = false;
  return retry && info.retryable;
}

} // namespace kernel_pytorch
