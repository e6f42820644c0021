// Device memory as pointers with arithmetic over OpenCL buffers.
//
// OpenCL hands out cl_mem objects, not addresses, but the ABI (and PyTorch:
// a view's data pointer lands inside its base's allocation) needs pointers
// that can be offset. Each kpdrMalloc creates one cl_mem and reserves a range
// of a per-device *address space* for it; the pointer returned is the start
// of that range. Any pointer inside the range is translated back to
// (cl_mem, byte offset) at each copy and kernel launch. The addresses lie at
// 2^56 and above, outside every host mapping: the host cannot dereference
// them (host_addressable = 0), exactly like a discrete GPU's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cl_api.h"
#include "kpdr.h"

namespace kpdr_opencl {

// One live kpdrMalloc; the cl_mem is released when the last holder lets go
// (a copy or launch being enqueued keeps it alive; OpenCL itself keeps it for
// commands already enqueued).
struct Allocation {
  const ClApi* cl = nullptr;
  int device = -1;
  uint64_t address = 0;
  size_t size = 0;
  size_t charged = 0;
  cl_mem mem = nullptr;
  ~Allocation();
};

// A device pointer resolved: the buffer and the offset of the pointer in it.
struct DeviceRange {
  std::shared_ptr<Allocation> allocation;
  size_t offset = 0;
  size_t available() const { return allocation->size - offset; }
};

struct DeviceLimits {
  uint64_t capacity = 0;   // bytes kpdrMalloc may hand out in total
  uint64_t max_alloc = 0;  // CL_DEVICE_MAX_MEM_ALLOC_SIZE: one buffer's limit
  std::string name;
};

class DeviceMemory {
 public:
  DeviceMemory(const ClApi* cl, cl_context context, std::vector<DeviceLimits> limits);
  kpdrError_t allocate(int device, size_t size, void** ptr);
  kpdrError_t release(int device, void* ptr);
  // Finds the allocation holding `ptr` (any address inside it).
  bool find(const void* ptr, DeviceRange* range) const;
  void get_info(int device, size_t* free_bytes, size_t* total_bytes) const;

  static constexpr size_t kAlignment = 256;  // of every pointer kpdrMalloc returns

 private:
  // First-fit ranges of one device's address space, coalesced on release.
  struct AddressSpace {
    std::map<uint64_t, uint64_t> free;  // start -> length
    uint64_t used = 0;                  // bytes charged against the capacity
  };
  uint64_t reserve_locked(AddressSpace& space, uint64_t length);
  void unreserve_locked(AddressSpace& space, uint64_t start, uint64_t length);

  const ClApi* cl_;
  cl_context context_;
  std::vector<DeviceLimits> limits_;
  mutable std::mutex mutex_;
  std::vector<AddressSpace> spaces_;                            // guarded by mutex_
  std::map<uint64_t, std::shared_ptr<Allocation>> allocations_;  // by address; guarded
};

// kpdrMallocHost: page-locked host memory from CL_MEM_ALLOC_HOST_PTR buffers,
// mapped once for their lifetime. Drivers recognise copies from these mapped
// pointers and run them as DMA at full link speed (NVIDIA's documented pinned
// path), while copies from pageable memory are staged.
class PinnedHostMemory {
 public:
  PinnedHostMemory(const ClApi* cl, cl_context context, cl_command_queue map_queue)
      : cl_(cl), context_(context), queue_(map_queue) {}
  kpdrError_t allocate(size_t size, void** ptr);
  kpdrError_t release(void* ptr);
  bool contains(const void* ptr) const;

 private:
  struct Block {
    size_t size;
    cl_mem mem;
  };
  const ClApi* cl_;
  cl_context context_;
  cl_command_queue queue_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Block> blocks_;  // by mapped address; guarded by mutex_
};

}  // namespace kpdr_opencl
