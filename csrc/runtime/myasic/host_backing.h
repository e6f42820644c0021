// The host memory that stands in for one simulated device allocation.
#pragma once

#include <cstddef>
#include <memory>

#include "kpdr.h"

namespace myasic {

// Owns host memory for the lifetime of one device allocation. Shared by
// in-flight copies so a kpdrFree racing with queued work never frees memory a
// stream worker is still writing (the accounting is released immediately).
class HostBacking {
 public:
  // Every backing starts on a 64-byte boundary (cache line / AVX-512 width).
  static constexpr std::size_t kAlignment = 64;

  // Reserves `bytes` (> 0) of host memory. Large sizes are reserved with
  // mmap(MAP_NORESERVE) so pages are committed only when first touched: a
  // 16 GiB simulated device must fit on a host with less free RAM.
  static kpdrError_t create(std::size_t bytes, std::shared_ptr<HostBacking>* out);

  ~HostBacking();
  HostBacking(const HostBacking&) = delete;
  HostBacking& operator=(const HostBacking&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  HostBacking(void* data, std::size_t bytes, bool mapped)
      : data_(data), bytes_(bytes), mapped_(mapped) {}

  void* data_;
  std::size_t bytes_;
  bool mapped_;  // true: release with munmap, false: with free
};

}  // namespace myasic
