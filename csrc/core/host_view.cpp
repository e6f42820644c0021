#include "core/core.h"

#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <mutex>


namespace kernel_pytorch {
namespace {

thread_local c10::DeviceIndex t_route_device = -1;

// A host alias's DataPtr holds a reference on the device StorageImpl as its
// context, keeping the device memory alive as long as the alias lives.
void delete_alias_context(void* ctx) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx));
}

c10::Storage storage_of_alias_context(void* ctx) {
  auto* impl = static_cast<c10::StorageImpl*>(ctx);
  c10::raw::intrusive_ptr::incref(impl);
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim(impl));
}

class RoutingCpuAllocator final : public c10::Allocator {
 public:
  explicit RoutingCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t n) override {
    if (t_route_device < 0) {
      return fallback_->allocate(n);
    }
    c10::DataPtr dp = device_allocator().allocate_on(t_route_device, n);
    dp.unsafe_set_device(c10::Device(c10::DeviceType::CPU));
    return dp;
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &raw_delete;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    fallback_->copy_data(dest, src, count);
  }

  static void raw_delete(void* ptr);
  c10::Allocator* fallback() const {
    return fallback_;
  }

 private:
  c10::Allocator* fallback_;
};

RoutingCpuAllocator* g_router = nullptr;

void RoutingCpuAllocator::raw_delete(void* ptr) {
  // raw_allocate() may have been served by either side.
  if (device_allocator().owns(ptr)) {
    device_allocator().raw_deleter()(ptr);
  } else {
    g_router->fallback()->raw_deleter()(ptr);
  }
}

at::Tensor wrap(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), like.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  // Conjugate and negative views keep their bit: ops such as mm take them
  // as they are (the Conjugate key lets them through), so dropping the bit
  // would compute with the unconjugated values.
  t._set_conj(like.is_conj());
  t._set_neg(like.is_neg());
  return t;
}

} // namespace

at::Tensor host_alias(const at::Tensor& device_tensor) {
  const c10::Storage& storage = device_tensor.storage();
  void* data = storage.mutable_data();
  c10::StorageImpl* ctx = storage.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(ctx);
  c10::DataPtr dp(data, ctx, &delete_alias_context, c10::Device(c10::DeviceType::CPU));
  auto alias_storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), storage.nbytes(), std::move(dp),
      c10::GetCPUAllocator(), /*resizable=*/true));
  return wrap(std::move(alias_storage), c10::DispatchKey::CPU, device_tensor);
}

c10::Storage DeviceAdopter::device_storage_for(const at::Tensor& cpu_result) {
  c10::StorageImpl* impl = cpu_result.storage().unsafeGetStorageImpl();
  auto found = adopted_.find(impl);
  if (found != adopted_.end()) {
    return found->second;
  }
  c10::DataPtr& dp = impl->mutable_data_ptr();
  c10::Storage result;
  if (dp.get_deleter() == &delete_alias_context) {
    // A view of an input's host alias: the device storage itself.
    result = storage_of_alias_context(dp.get_context());
  } else if (dp.get_deleter() == device_allocator().raw_deleter()) {
    // Device memory handed out while routing: move it into a device storage.
    c10::DataPtr taken = impl->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
    taken.unsafe_set_device(c10::Device(c10::DeviceType::PrivateUse1, device_));
    result = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), impl->nbytes(), std::move(taken), &device_allocator(),
        /*resizable=*/true));
    // The CPU result (about to be dropped) keeps a valid, empty storage.
    impl->set_nbytes(0);
  } else {
    return c10::Storage(); // plain host memory: caller copies
  }
  adopted_.emplace(impl, result);
  return result;
}

at::Tensor DeviceAdopter::adopt(const at::Tensor& cpu_result) {
  if (!cpu_result.defined() || cpu_result.device().type() != c10::DeviceType::CPU) {
    return cpu_result;
  }
  c10::Storage storage = device_storage_for(cpu_result);
  if (storage) {
    return wrap(std::move(storage), c10::DispatchKey::PrivateUse1, cpu_result);
  }
  auto out = at::empty_strided(
      cpu_result.sizes(), cpu_result.strides(),
      cpu_result.options().device(c10::Device(c10::DeviceType::PrivateUse1, device_)));
  out.copy_(cpu_result);
  return out;
}

void DeviceAdopter::write_back(const at::Tensor& alias, const at::Tensor& device_tensor) {
  auto* dev_impl = device_tensor.unsafeGetTensorImpl();
  c10::StorageImpl* alias_storage = alias.storage().unsafeGetStorageImpl();
  if (alias_storage->data_ptr().get_deleter() != &delete_alias_context) {
    // The kernel reallocated the alias (resize of an out= argument).
    c10::Storage fresh = device_storage_for(alias);
    TORCH_INTERNAL_ASSERT(fresh, "my_asic: an out= kernel reallocated its output outside device memory");
    c10::StorageImpl* target = device_tensor.storage().unsafeGetStorageImpl();
    c10::StorageImpl* source = fresh.unsafeGetStorageImpl();
    target->set_data_ptr_noswap(source->set_data_ptr(c10::DataPtr(nullptr, source->device())));
    target->set_nbytes(source->nbytes());
  }
  if (dev_impl->sizes() != alias.sizes() || dev_impl->strides() != alias.strides() ||
      dev_impl->storage_offset() != alias.storage_offset()) {
    dev_impl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
  }
}

RouteCpuAllocationsToDevice::RouteCpuAllocationsToDevice(c10::DeviceIndex device)
    : previous_(t_route_device) {
  t_route_device = device;
}

RouteCpuAllocationsToDevice::~RouteCpuAllocationsToDevice() {
  t_route_device = previous_;
}

void install_routing_cpu_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_router = new RoutingCpuAllocator(c10::GetCPUAllocator());
    // Priority above the default CPU allocator's so ours stays in place.
    c10::SetCPUAllocator(g_router, /*priority=*/1);
  });
}

} // namespace kernel_pytorch
