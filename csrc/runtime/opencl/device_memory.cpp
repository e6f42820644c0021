#include "device_memory.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "errors.h"

namespace kpdr_opencl {
namespace {

// Device d's addresses: [kSpaceBase + d * kSpaceSize, + kSpaceSize). Below
// 2^63 so torch's signed data_ptr() stays positive; far above user space.
constexpr uint64_t kSpaceBase = uint64_t(1) << 56;
constexpr uint64_t kSpaceSize = uint64_t(1) << 48;

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

}  // namespace

Allocation::~Allocation() {
  if (mem != nullptr) cl->ReleaseMemObject(mem);
}

DeviceMemory::DeviceMemory(const ClApi* cl, cl_context context, std::vector<DeviceLimits> limits)
    : cl_(cl), context_(context), limits_(std::move(limits)), spaces_(limits_.size()) {
  for (size_t d = 0; d < spaces_.size(); ++d) {
    spaces_[d].free[kSpaceBase + d * kSpaceSize] = kSpaceSize;
  }
}

uint64_t DeviceMemory::reserve_locked(AddressSpace& space, uint64_t length) {
  for (auto it = space.free.begin(); it != space.free.end(); ++it) {
    if (it->second < length) continue;
    const uint64_t start = it->first, left = it->second - length;
    space.free.erase(it);
    if (left > 0) space.free[start + length] = left;
    return start;
  }
  return 0;
}

void DeviceMemory::unreserve_locked(AddressSpace& space, uint64_t start, uint64_t length) {
  auto next = space.free.lower_bound(start);
  if (next != space.free.end() && start + length == next->first) {
    length += next->second;
    next = space.free.erase(next);
  }
  if (next != space.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      prev->second += length;
      return;
    }
  }
  space.free[start] = length;
}

kpdrError_t DeviceMemory::allocate(int device, size_t size, void** ptr) {
  if (size == 0) {
    *ptr = nullptr;  // like the reference runtime: no buffer, nothing charged
    return KPDR_SUCCESS;
  }
  const DeviceLimits& limit = limits_[device];
  const uint64_t charged = round_up(size, kAlignment);
  if (size > limit.max_alloc) {
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                "kpdrMalloc: requested " + bytes_text(size) + " on device " +
                    std::to_string(device) + " (" + limit.name +
                    ") but one OpenCL buffer is limited to CL_DEVICE_MAX_MEM_ALLOC_SIZE = " +
                    bytes_text(limit.max_alloc) +
                    " on this device; split the tensor (smaller batch or sequence)");
  }
  std::shared_ptr<Allocation> allocation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    AddressSpace& space = spaces_[device];
    if (charged > limit.capacity - space.used) {
      const uint64_t free = limit.capacity - space.used;
      return fail(KPDR_ERROR_OUT_OF_MEMORY,
                  "kpdrMalloc: requested " + bytes_text(size) + " on device " +
                      std::to_string(device) + " (" + limit.name + ") but only " +
                      bytes_text(free) + " of " + bytes_text(limit.capacity) +
                      " are free; free tensors (del, torch.my_asic.empty_cache()) or use "
                      "smaller batches");
    }
    const uint64_t address = reserve_locked(space, charged);
    if (address == 0) {
      return fail(KPDR_ERROR_OUT_OF_MEMORY,
                  "kpdrMalloc: device " + std::to_string(device) +
                      "'s address space is fragmented beyond a free range of " +
                      bytes_text(charged) + "; free memory or start a new process");
    }
    space.used += charged;
    allocation = std::make_shared<Allocation>();
    allocation->cl = cl_;
    allocation->device = device;
    allocation->address = address;
    allocation->size = size;
    allocation->charged = charged;
    allocations_[address] = allocation;
  }
  cl_int status = CL_SUCCESS;
  // Created outside the lock: drivers may take milliseconds for large buffers.
  // `charged` bytes (whole 32-bit words): scatter's 16-bit atomic adds
  // compare-and-swap the word that holds the element.
  cl_mem mem = cl_->CreateBuffer(context_, CL_MEM_READ_WRITE, std::min<uint64_t>(charged, limit.max_alloc),
                                 nullptr, &status);
  if (mem == nullptr || status != CL_SUCCESS) {
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_.erase(allocation->address);
    AddressSpace& space = spaces_[device];
    space.used -= charged;
    unreserve_locked(space, allocation->address, charged);
    const bool oom = status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES ||
                     status == CL_OUT_OF_HOST_MEMORY || status == CL_INVALID_BUFFER_SIZE;
    return fail(oom ? KPDR_ERROR_OUT_OF_MEMORY : KPDR_ERROR_UNKNOWN,
                "kpdrMalloc: clCreateBuffer of " + bytes_text(size) + " on device " +
                    std::to_string(device) + " (" + limit.name + ") failed with " +
                    cl_error_name(status) +
                    (oom ? "; the driver has no memory left (other processes may hold it): "
                           "free tensors or use smaller batches"
                         : "; the OpenCL driver refused the buffer"));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);  // find() reads mem under the lock
    allocation->mem = mem;
  }
  *ptr = reinterpret_cast<void*>(allocation->address);
  return KPDR_SUCCESS;
}

kpdrError_t DeviceMemory::release(int device, void* ptr) {
  if (ptr == nullptr) return KPDR_SUCCESS;
  std::shared_ptr<Allocation> allocation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(reinterpret_cast<uint64_t>(ptr));
    if (it == allocations_.end()) {
      auto after = allocations_.upper_bound(reinterpret_cast<uint64_t>(ptr));
      if (after != allocations_.begin() &&
          reinterpret_cast<uint64_t>(ptr) < std::prev(after)->first + std::prev(after)->second->size) {
        return fail(KPDR_ERROR_INVALID_VALUE,
                    "kpdrFree: " + pointer_text(ptr) +
                        " points inside an allocation, not at its start; free the pointer "
                        "kpdrMalloc returned");
      }
      return fail(KPDR_ERROR_INVALID_HANDLE,
                  "kpdrFree: " + pointer_text(ptr) +
                      " is not a live allocation (already freed, or not from kpdrMalloc)");
    }
    if (it->second->device != device) {
      return fail(KPDR_ERROR_INVALID_VALUE,
                  "kpdrFree: " + pointer_text(ptr) + " belongs to device " +
                      std::to_string(it->second->device) + ", not device " +
                      std::to_string(device) + "; free it on its own device");
    }
    allocation = std::move(it->second);
    allocations_.erase(it);
    AddressSpace& space = spaces_[device];
    space.used -= allocation->charged;
    unreserve_locked(space, allocation->address, allocation->charged);
  }
  // The cl_mem goes when the last user lets go; OpenCL keeps it for commands
  // already enqueued (clReleaseMemObject defers the free), so freeing with a
  // copy in flight is safe.
  return KPDR_SUCCESS;
}

bool DeviceMemory::find(const void* ptr, DeviceRange* range) const {
  const uint64_t address = reinterpret_cast<uint64_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto after = allocations_.upper_bound(address);
  if (after == allocations_.begin()) return false;
  const auto& candidate = std::prev(after)->second;
  if (address >= candidate->address + candidate->size || candidate->mem == nullptr) return false;
  range->allocation = candidate;
  range->offset = address - candidate->address;
  return true;
}

void DeviceMemory::get_info(int device, size_t* free_bytes, size_t* total_bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *total_bytes = limits_[device].capacity;
  *free_bytes = limits_[device].capacity - spaces_[device].used;
}

kpdrError_t PinnedHostMemory::allocate(size_t size, void** ptr) {
  if (size == 0) {
    *ptr = nullptr;
    return KPDR_SUCCESS;
  }
  cl_int status = CL_SUCCESS;
  cl_mem mem = cl_->CreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size,
                                 nullptr, &status);
  if (mem == nullptr || status != CL_SUCCESS) {
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                "kpdrMallocHost: a pinned host buffer of " + bytes_text(size) +
                    " could not be created (" + cl_error_name(status) +
                    "); free pinned tensors or pin less memory");
  }
  void* host = cl_->EnqueueMapBuffer(queue_, mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0,
                                     nullptr, nullptr, &status);
  if (host == nullptr || status != CL_SUCCESS) {
    cl_->ReleaseMemObject(mem);
    return fail(KPDR_ERROR_OUT_OF_MEMORY,
                "kpdrMallocHost: mapping a pinned buffer of " + bytes_text(size) + " failed (" +
                    cl_error_name(status) + "); pin less memory");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_[reinterpret_cast<uintptr_t>(host)] = Block{size, mem};
  *ptr = host;
  return KPDR_SUCCESS;
}

kpdrError_t PinnedHostMemory::release(void* ptr) {
  if (ptr == nullptr) return KPDR_SUCCESS;
  Block block{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks_.end()) {
      return fail(KPDR_ERROR_INVALID_HANDLE,
                  "kpdrFreeHost: " + pointer_text(ptr) +
                      " is not live memory from kpdrMallocHost (already freed?)");
    }
    block = it->second;
    blocks_.erase(it);
  }
  cl_event unmapped = nullptr;
  if (cl_->EnqueueUnmapMemObject(queue_, block.mem, ptr, 0, nullptr, &unmapped) == CL_SUCCESS &&
      unmapped != nullptr) {
    cl_->WaitForEvents(1, &unmapped);
    cl_->ReleaseEvent(unmapped);
  }
  cl_->ReleaseMemObject(block.mem);
  return KPDR_SUCCESS;
}

bool PinnedHostMemory::contains(const void* ptr) const {
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  auto after = blocks_.upper_bound(address);
  if (after == blocks_.begin()) return false;
  auto block = std::prev(after);
  return address < block->first + block->second.size;
}

}  // namespace kpdr_opencl
