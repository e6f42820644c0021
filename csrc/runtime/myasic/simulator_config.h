// The simulated chip's shape, fixed once at kpdrInit from the environment and
// the kpdrInit options string (options win over environment, key by key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kpdr.h"

namespace myasic {

// The largest default capacity per device; less where the host cannot hold
// device_count of them (see default_memory_bytes_per_device).
constexpr std::size_t kMaxDefaultMemoryBytes = std::size_t{16} << 30;  // 16 GiB

struct SimulatorConfig {
  int device_count = 2;
  std::size_t memory_bytes_per_device = kMaxDefaultMemoryBytes;
  // Whether memory_mb may make the devices together larger than the host's memory
  // (option overcommit / MY_ASIC_OVERCOMMIT): refused unless asked for.
  bool overcommit = false;
  // Set when overcommit let the devices exceed the host: kpdrInit prints it to stderr.
  std::string overcommit_notice;
  std::vector<std::string> device_names;  // one per device, never empty after parsing
  bool host_addressable = true;
  int32_t compute_units = 64;
  // Simulated host<->device and device<->device link speed in GB/s
  // (1e9 bytes/s); 0 means copies run at host memcpy speed.
  double copy_bandwidth_gbps = 0.0;
};

// The default capacity per device: 16 GiB, or the host's memory (host_memory.h)
// split over `device_count` devices where that is less, rounded down to a whole
// GiB (to a MiB below 1 GiB), so the simulated devices together fit the host.
std::size_t default_memory_bytes_per_device(int device_count, std::size_t host_bytes);

// Builds the config from MY_ASIC_* environment variables overridden by
// `options` ("key=value;key=value", may be null). On bad input returns
// KPDR_ERROR_INVALID_VALUE with a message naming the key and the fix.
kpdrError_t parse_simulator_config(const char* options, SimulatorConfig* config);

}  // namespace myasic
