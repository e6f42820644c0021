// The process-wide simulator state created by kpdrInit, and its lifecycle
// around fork and process exit.
#pragma once

#include "device_memory.h"
#include "event.h"
#include "handle_registry.h"
#include "kpdr.h"
#include "pinned_host_memory.h"
#include "simulator_config.h"
#include "stream.h"

namespace myasic {

class Runtime {
 public:
  // Parses the config and creates the runtime; ALREADY_INITIALIZED after a
  // successful call. A failed call leaves the process uninitialised, so it
  // may be retried with corrected options.
  static kpdrError_t initialize(const char* options);
  // The runtime, or NOT_INITIALIZED (before kpdrInit, or in a child process
  // forked after it: the stream workers do not survive fork).
  static kpdrError_t acquire(Runtime** runtime);

  const SimulatorConfig& config() const { return config_; }
  DeviceMemory& device_memory() { return device_memory_; }
  PinnedHostMemory& pinned_host_memory() { return pinned_host_memory_; }
  HandleRegistry<Stream, kpdrStream_t>& streams() { return streams_; }
  HandleRegistry<Event, kpdrEvent_t>& events() { return events_; }

  // INVALID_DEVICE with the valid range when `device` is out of range.
  kpdrError_t check_device(int device) const;
  // Waits for all work on every stream of `device`.
  void synchronize_device(int device);
  // Finishes queued work quickly and joins every worker (process exit).
  void shut_down_streams();

 private:
  explicit Runtime(SimulatorConfig config);

  const SimulatorConfig config_;
  DeviceMemory device_memory_;
  PinnedHostMemory pinned_host_memory_;
  HandleRegistry<Stream, kpdrStream_t> streams_;
  HandleRegistry<Event, kpdrEvent_t> events_;
};

}  // namespace myasic
