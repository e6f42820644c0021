// Host kernel scope: while a CPU kernel computes on device memory (the
// native kernels of a host-addressable runtime), device work it starts on a
// stream must be complete before it returns, because the CPU code around it
// reads the memory at once. A `.contiguous()` inside an ATen CPU kernel, say,
// is a device-to-device copy on the stream.
#pragma once

namespace kernel_pytorch {

inline int& host_kernel_depth() {
  static thread_local int depth = 0;
  return depth;
}

inline bool in_host_kernel() {
  return host_kernel_depth() > 0;
}

struct HostKernelDepth {
  HostKernelDepth() {
    ++host_kernel_depth();
  }
  ~HostKernelDepth() {
    --host_kernel_depth();
  }
  HostKernelDepth(const HostKernelDepth&) = delete;
  HostKernelDepth& operator=(const HostKernelDepth&) = delete;
};

} // namespace kernel_pytorch
