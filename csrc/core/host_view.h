// Host views of device memory, for runtimes whose device memory is host
// addressable (kpdrDeviceProperties::host_addressable).
//
// CPU kernels can then compute on my_asic tensors in place: a device tensor is
// re-wrapped as a CPU tensor over the same bytes (no copy), and while a CPU
// kernel runs for my_asic, the CPU allocations it makes for its outputs are
// served from the device's memory, so the outputs become my_asic tensors
// without a copy either.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <unordered_map>

namespace kernel_pytorch {

// A CPU tensor aliasing `device_tensor` (same bytes, sizes, strides, offset).
at::Tensor host_alias(const at::Tensor& device_tensor);

// Turns CPU results of a kernel run for `device` into my_asic tensors:
// results over an aliased device storage or over device memory handed out
// while routing are wrapped without a copy; anything else is copied.
// `adopted` lets several results that share a storage keep sharing it.
class DeviceAdopter {
 public:
  explicit DeviceAdopter(c10::DeviceIndex device) : device_(device) {}
  at::Tensor adopt(const at::Tensor& cpu_result);
  // Makes `device_tensor` take over the (possibly resized/reallocated)
  // storage and geometry of its host alias after an out= kernel.
  void write_back(const at::Tensor& alias, const at::Tensor& device_tensor);

 private:
  c10::Storage device_storage_for(const at::Tensor& cpu_result);
  c10::DeviceIndex device_;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> adopted_;
};

// While alive, CPU allocations made on this thread come from `device`'s
// memory (still tagged as CPU memory, as CPU kernels expect).
class RouteCpuAllocationsToDevice {
 public:
  explicit RouteCpuAllocationsToDevice(c10::DeviceIndex device);
  ~RouteCpuAllocationsToDevice();
  RouteCpuAllocationsToDevice(const RouteCpuAllocationsToDevice&) = delete;
  RouteCpuAllocationsToDevice& operator=(const RouteCpuAllocationsToDevice&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// Installs the routing CPU allocator (idempotent). It defers to the allocator
// torch had before whenever no routing is active on the calling thread.
void install_routing_cpu_allocator();

} // namespace kernel_pytorch
