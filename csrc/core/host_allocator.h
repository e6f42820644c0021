// Pinned (page-locked) host memory for my_asic, from kpdrMallocHost.
// Tensor.pin_memory() and non_blocking copies use it. A block freed while an
// async copy may still read or write it is kept until that copy's event
// completes (record_event), so pinned buffers are never recycled too early.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace kernel_pytorch {

at::HostAllocator* host_allocator();
// True when ptr lies inside memory from kpdrMallocHost.
bool is_pinned_ptr(const void* ptr);

} // namespace kernel_pytorch
