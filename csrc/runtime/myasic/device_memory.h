// Simulated device memory: per-device capacity accounting and the table of
// live allocations, keyed by the address handed out to callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "host_backing.h"
#include "kpdr.h"

namespace myasic {

// What an address inside a live allocation resolves to.
struct DeviceAllocationView {
  int device = -1;
  std::uintptr_t device_base = 0;  // address kpdrMalloc returned
  std::size_t size = 0;            // bytes the caller asked for
  std::shared_ptr<HostBacking> backing;
};

class DeviceMemory {
 public:
  // Disguised device addresses (host_addressable=0) are the host address
  // plus this offset. The result lies at or above 2^54, far outside the
  // 47-bit user address space Linux hands out by default, so any host
  // dereference of a device pointer faults instead of silently working.
  static constexpr std::uintptr_t kDisguiseOffset = std::uintptr_t{0x5A} << 48;

  DeviceMemory(int device_count, std::size_t capacity_bytes, bool host_addressable);

  // Allocates `size` bytes on `device` (index already validated). size 0
  // yields *ptr == nullptr and consumes nothing. Capacity is charged in
  // 64-byte granules, like a real allocator's granularity.
  kpdrError_t allocate(int device, std::size_t size, void** ptr);
  // Releases an allocation by its base address; nullptr is a no-op.
  kpdrError_t release(int device, void* ptr);

  // Bytes still allocatable and the capacity of `device`.
  void get_info(int device, std::size_t* free_bytes, std::size_t* total_bytes) const;

  // The live allocation containing `address` (any byte of it), if any.
  bool find(const void* address, DeviceAllocationView* view) const;

  // Host address backing `address`, which must lie inside `view`.
  static void* host_address(const DeviceAllocationView& view, const void* address);

 private:
  struct Allocation {
    int device;
    std::size_t size;
    std::size_t charged_bytes;
    std::shared_ptr<HostBacking> backing;
  };

  const std::size_t capacity_bytes_;
  const bool host_addressable_;
  mutable std::mutex mutex_;
  std::vector<std::size_t> used_bytes_;              // per device, guarded by mutex_
  std::map<std::uintptr_t, Allocation> allocations_;  // by base address, guarded by mutex_
};

}  // namespace myasic
