#include "pinned_host_memory.h"

#include <cstdlib>

#include "byte_format.h"
#include "error_reporting.h"
#include "host_backing.h"

namespace myasic {

PinnedHostMemory::~PinnedHostMemory() {
  for (const auto& [base, size] : sizes_by_base_) std::free(reinterpret_cast<void*>(base));
}

kpdrError_t PinnedHostMemory::allocate(std::size_t size, void** ptr) {
  *ptr = nullptr;
  if (size == 0) return KPDR_SUCCESS;
  constexpr std::size_t kAlignment = HostBacking::kAlignment;
  if (size > SIZE_MAX - kAlignment) {
    return fail(KPDR_ERROR_OUT_OF_MEMORY, "kpdrMallocHost size " + std::to_string(size) +
                                              " bytes is larger than the address space");
  }
  const std::size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                "kpdrMallocHost could not allocate " + format_bytes(size) + " of host memory");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  sizes_by_base_.emplace(reinterpret_cast<std::uintptr_t>(data), size);
  *ptr = data;
  return KPDR_SUCCESS;
}

kpdrError_t PinnedHostMemory::release(void* ptr) {
  if (ptr == nullptr) return KPDR_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (sizes_by_base_.erase(reinterpret_cast<std::uintptr_t>(ptr)) == 0) {
      return fail(KPDR_ERROR_INVALID_HANDLE,
                  "kpdrFreeHost got a pointer that kpdrMallocHost did not return "
                  "(or that was already freed)");
    }
  }
  std::free(ptr);
  return KPDR_SUCCESS;
}

bool PinnedHostMemory::contains(const void* address) const {
  const auto key = reinterpret_cast<std::uintptr_t>(address);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sizes_by_base_.upper_bound(key);
  if (it == sizes_by_base_.begin()) return false;
  --it;
  return key < it->first + it->second;
}

}  // namespace myasic
