// The device error handler: one callback that sees every my_asic device error
// (an allocation the device cannot serve, a failed kernel, a failed copy, any
// other runtime call) before the exception reaches user code
// (torch.my_asic.set_error_handler).
#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <functional>
#include <string>

namespace kernel_pytorch {

struct DeviceErrorInfo {
  c10::DeviceIndex device = -1;
  std::string kind;     // "out_of_memory", "kernel", "copy" or "runtime"
  std::string message;  // the runtime's (or allocator's) message
  std::string op;       // the runtime call, kernel or allocation that failed
  size_t requested_bytes = 0; // out_of_memory: the allocation's size
  bool retryable = false;     // out_of_memory in the allocator: the handler may ask for one retry
};

// Returns true to ask for one retry (honoured for retryable errors only).
using DeviceErrorHandler = std::function<bool(const DeviceErrorInfo&)>;

// Installs `handler` (an empty function removes it).
void set_device_error_handler(DeviceErrorHandler handler);
bool has_device_error_handler();

// Calls the handler, if any, and returns whether it asked for a retry. Not
// re-entered: an error raised while the handler runs goes straight to its
// caller. The handler's own exceptions are reported as warnings and ignored,
// so the original error still reaches the user.
bool notify_device_error(const DeviceErrorInfo& info);

} // namespace kernel_pytorch
