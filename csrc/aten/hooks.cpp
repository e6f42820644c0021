// at::PrivateUse1HooksInterface: how ATen asks my_asic about availability,
// devices, generators and pinned memory (backward(), pin_memory(),
// torch.Generator("my_asic"), torch.accelerator all go through here).
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include "core/core.h"
#include "device_init.h"

namespace kernel_pytorch {
namespace {

struct MyAsicHooks final : public at::PrivateUse1HooksInterface {
  void init() const override {
    initialize_device();
  }

  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count_noexcept() > 0;
  }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return runtime_initialized() && device_index >= 0 && device_index < device_count_noexcept();
  }

  c10::DeviceIndex deviceCount() const override {
    return device_count_noexcept();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_current_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = current_device();
    set_current_device(device);
    return old;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    int device = 0;
    KPDR_CHECK(rt().PointerGetDevice(data, &device));
    TORCH_CHECK(device >= 0, "my_asic: pointer ", data, " is pinned host memory, not device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  }

  bool isPinnedPtr(const void* data) const override {
    return is_pinned_ptr(data);
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return host_allocator();
  }

  // Untyped storage resize (storage.resize_()): new device memory, old bytes kept.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_device_storage(storage.unsafeGetStorageImpl(), newsize);
  }
};

// Registered when the extension loads, before any tensor can reach my_asic.
const bool kRegistered = [] {
  at::RegisterPrivateUse1HooksInterface(new MyAsicHooks());
  return true;
}();

} // namespace
} // namespace kernel_pytorch
