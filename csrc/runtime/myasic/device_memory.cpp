#include "device_memory.h"

#include <string>

#include "byte_format.h"
#include "error_reporting.h"

namespace myasic {

DeviceMemory::DeviceMemory(int device_count, std::size_t capacity_bytes, bool host_addressable)
    : capacity_bytes_(capacity_bytes),
      host_addressable_(host_addressable),
      used_bytes_(static_cast<std::size_t>(device_count), 0) {}

kpdrError_t DeviceMemory::allocate(int device, std::size_t size, void** ptr) {
  *ptr = nullptr;
  if (size == 0) return KPDR_SUCCESS;
  // Sizes beyond the capacity skip the rounding (it could overflow) and
  // fail the capacity check below like any other oversized request.
  const std::size_t charged =
      size > capacity_bytes_
          ? size
          : (size + HostBacking::kAlignment - 1) / HostBacking::kAlignment * HostBacking::kAlignment;
  {
    // Charge first so concurrent allocations cannot both pass the check.
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t& used = used_bytes_[device];
    if (charged > capacity_bytes_ - used) {
      // Facts only, each once: callers (the ATen allocator) add their own advice.
      return fail(KPDR_ERROR_OUT_OF_MEMORY,
                  "requested " + format_bytes(size) + " (" + std::to_string(size) +
                      " bytes) on device " + std::to_string(device) + " but only " +
                      format_bytes(capacity_bytes_ - used) + " of " +
                      format_bytes(capacity_bytes_) + " free (" +
                      std::to_string(capacity_bytes_ - used) + " bytes free)");
    }
    used += charged;
  }
  std::shared_ptr<HostBacking> backing;
  if (kpdrError_t error = HostBacking::create(size, &backing)) {
    std::lock_guard<std::mutex> lock(mutex_);
    used_bytes_[device] -= charged;
    return error;
  }
  std::uintptr_t base = reinterpret_cast<std::uintptr_t>(backing->data());
  if (!host_addressable_) base += kDisguiseOffset;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_.emplace(base, Allocation{device, size, charged, std::move(backing)});
  }
  *ptr = reinterpret_cast<void*>(base);
  return KPDR_SUCCESS;
}

kpdrError_t DeviceMemory::release(int device, void* ptr) {
  if (ptr == nullptr) return KPDR_SUCCESS;
  std::shared_ptr<HostBacking> backing;  // dropped after unlocking: munmap can be slow
  std::lock_guard<std::mutex> lock(mutex_);
  const auto address = reinterpret_cast<std::uintptr_t>(ptr);
  const auto it = allocations_.find(address);
  if (it == allocations_.end()) {
    auto upper = allocations_.upper_bound(address);
    if (upper != allocations_.begin()) {
      --upper;
      if (address < upper->first + upper->second.size) {
        return fail(KPDR_ERROR_INVALID_VALUE,
                    "kpdrFree got an address " + std::to_string(address - upper->first) +
                        " bytes inside an allocation; pass the pointer kpdrMalloc returned");
      }
    }
    return fail(KPDR_ERROR_INVALID_HANDLE,
                "kpdrFree got a pointer that is not a live allocation of this runtime "
                "(already freed, or never returned by kpdrMalloc)");
  }
  if (it->second.device != device) {
    return fail(KPDR_ERROR_INVALID_VALUE,
                "kpdrFree(device=" + std::to_string(device) + ") got a pointer allocated on device " +
                    std::to_string(it->second.device) + "; pass the owning device");
  }
  used_bytes_[device] -= it->second.charged_bytes;
  backing = std::move(it->second.backing);
  allocations_.erase(it);
  return KPDR_SUCCESS;
}

void DeviceMemory::get_info(int device, std::size_t* free_bytes, std::size_t* total_bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *free_bytes = capacity_bytes_ - used_bytes_[device];
  *total_bytes = capacity_bytes_;
}

bool DeviceMemory::find(const void* address, DeviceAllocationView* view) const {
  const auto key = reinterpret_cast<std::uintptr_t>(address);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocations_.upper_bound(key);  // first allocation starting after address
  if (it == allocations_.begin()) return false;
  --it;
  if (key >= it->first + it->second.size) return false;
  *view = DeviceAllocationView{it->second.device, it->first, it->second.size, it->second.backing};
  return true;
}

void* DeviceMemory::host_address(const DeviceAllocationView& view, const void* address) {
  const auto offset = reinterpret_cast<std::uintptr_t>(address) - view.device_base;
  return static_cast<char*>(view.backing->data()) + offset;
}

}  // namespace myasic
