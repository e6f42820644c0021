// Host memory from kpdrMallocHost, tracked so kpdrPointerGetDevice can
// answer -1 for it and kpdrFreeHost can reject foreign pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "kpdr.h"

namespace myasic {

// The simulator has no DMA engine, so "page-locked" memory needs no mlock:
// plain 64-byte aligned host memory behaves identically for its copies, and
// skipping mlock avoids failures under a small RLIMIT_MEMLOCK.
class PinnedHostMemory {
 public:
  ~PinnedHostMemory();

  // size 0 yields *ptr == nullptr.
  kpdrError_t allocate(std::size_t size, void** ptr);
  // nullptr is a no-op; anything not from allocate() is INVALID_HANDLE.
  kpdrError_t release(void* ptr);
  // True when `address` lies inside a live pinned allocation.
  bool contains(const void* address) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> sizes_by_base_;  // guarded by mutex_
};

}  // namespace myasic
