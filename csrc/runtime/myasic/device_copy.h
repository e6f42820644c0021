// kpdrMemcpyAsync's validation and the copy a stream worker later runs.
#pragma once

#include <cstddef>
#include <memory>

#include "device_memory.h"
#include "host_backing.h"
#include "kpdr.h"

namespace myasic {

// A validated copy between host addresses (device pointers already
// translated), holding the device backings alive until it has run.
struct CopyPlan {
  void* destination = nullptr;
  const void* source = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<HostBacking> destination_backing;
  std::shared_ptr<HostBacking> source_backing;
  double bandwidth_gbps = 0.0;  // GB/s (1e9 bytes/s); 0 = host memcpy speed

  // Waits the simulated transfer time, then moves the bytes (memmove:
  // source and destination may overlap within one allocation).
  void run() const;
};

// Checks that `raw_kind` (kpdrMemcpyAsync's kind, read as an int) is a
// kpdrMemcpyKind, that `dst`/`src` are the right kind of memory for it, that the
// whole [ptr, ptr+size) range of each device side lies inside one live
// allocation, and that the stream's device takes part in the copy.
kpdrError_t plan_copy(const DeviceMemory& memory, void* dst, const void* src, std::size_t size,
                      int raw_kind, int stream_device, double bandwidth_gbps,
                      CopyPlan* plan);

// Makes simulated transfer delays end at once (process exit drains streams
// and must not wait out a deliberately slow simulated link).
void skip_simulated_transfer_delays();

}  // namespace myasic
