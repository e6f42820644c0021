// The simulated chip's shape, fixed once at kpdrInit from the environment and
// the kpdrInit options string (options win over environment, key by key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kpdr.h"

namespace myasic {

struct SimulatorConfig {
  int device_count = 2;
  std::size_t memory_bytes_per_device = std::size_t{16} << 30;  // 16 GiB
  std::vector<std::string> device_names;  // one per device, never empty after parsing
  bool host_addressable = true;
  int32_t compute_units = 64;
  // Simulated host<->device and device<->device link speed in GB/s
  // (1e9 bytes/s); 0 means copies run at host memcpy speed.
  double copy_bandwidth_gbps = 0.0;
};

// Builds the config from MY_ASIC_* environment variables overridden by
// `options` ("key=value;key=value", may be null). On bad input returns
// KPDR_ERROR_INVALID_VALUE with a message naming the key and the fix.
kpdrError_t parse_simulator_config(const char* options, SimulatorConfig* config);

}  // namespace myasic
