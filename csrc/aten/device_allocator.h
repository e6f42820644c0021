// Caching device allocator for my_asic (c10::DeviceAllocator).
//
// Device memory comes from kpdrMalloc and is cached per device after a tensor
// dies, so a training loop does not call the runtime per step. Freed blocks
// are reused only by the stream they were allocated on (work on one stream is
// ordered); record_stream() makes a block wait for other streams' work.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StorageImpl.h>

#include "runtime.h"

#include <functional>

namespace kernel_pytorch {

class MyAsicDeviceAllocator final : public c10::DeviceAllocator {
 public:
  // Allocates on the calling thread's current my_asic device.
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // Caps this process's reserved memory on `device` at fraction * capacity.
  void setMemoryFraction(double fraction, c10::DeviceIndex device);
  double getMemoryFraction(c10::DeviceIndex device);
  // True when ptr is the start of a live block of this allocator.
  bool owns(const void* ptr);
};

MyAsicDeviceAllocator& device_allocator();

// Calls fn(used bytes, total bytes) of `device` (total minus free, as
// mem_get_info reports them) after an allocation that took new device memory
// while the device's use is at or above `threshold_bytes`: the memory
// monitor's allocation-path check. Cached blocks reused cost nothing. One
// watch per device; an empty fn removes it.
void set_usage_watch(c10::DeviceIndex device, size_t threshold_bytes, std::function<void(size_t, size_t)> fn);

// Grows or shrinks a device storage to `nbytes`, keeping the leading bytes
// (Tensor.resize_, UntypedStorage.resize_).
void resize_device_storage(c10::StorageImpl* storage, size_t nbytes);

} // namespace kernel_pytorch
