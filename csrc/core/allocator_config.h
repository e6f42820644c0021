// The my_asic caching allocator's settings: MY_ASIC_ALLOC_CONF, the
// device-generic PYTORCH_ALLOC_CONF, and _set_allocator_settings() at run time,
// all in PYTORCH_CUDA_ALLOC_CONF's syntax ("key:value,key:value").
// docs/environment.md lists the keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace kernel_pytorch {

constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();

struct AllocatorSettings {
  size_t max_pool_size = kNoLimit;   // bytes the allocator may reserve per device
  size_t initial_pool_size = 0;      // bytes reserved at a device's first allocation
  double growth_factor = 1.0;        // a new large segment is >= (factor - 1) x reserved
  size_t max_split_size = kNoLimit;  // cached blocks above this are never split
  double garbage_collection_threshold = 0.0; // free cache above this fraction of the limit
  // Where each setting came from, as a user would write it again (for
  // messages): e.g. "MY_ASIC_ALLOC_CONF=max_pool_size_mb:512".
  std::string max_pool_size_origin;
  std::string garbage_collection_threshold_origin;
  uint64_t version = 0; // grows on every change
};

// The current settings (MY_ASIC_ALLOC_CONF and PYTORCH_ALLOC_CONF are read on
// the first call). Throws c10::ValueError naming the variable and the key when
// the environment holds an invalid setting.
AllocatorSettings allocator_settings();

// Cheap check for the allocation path: the version allocator_settings() would
// return now (0 before the environment is read).
uint64_t allocator_settings_version();

// Applies "key:value,..." at run time (torch.my_asic.memory._set_allocator_settings):
// keys it names change, the others keep their values. Invalid input changes
// nothing and throws c10::ValueError naming the key and the valid keys.
void set_allocator_settings(const std::string& conf);

// The settings that differ from the defaults, in the same syntax.
std::string allocator_settings_string();

} // namespace kernel_pytorch
