// The ops that cannot go through the CPU fallback: factories must allocate
// device memory, and views must share the device tensor's storage rather than
// produce a copy.
#include <ATen/EmptyTensor.h>
#include <ATen/TensorUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "core/core.h"

namespace kernel_pytorch {
namespace {

const c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

// Quantized dtypes need a quantizer (QTensorImpl) and QuantizedPrivateUse1
// kernels, which my_asic does not register: a plain tensor of such a dtype
// would look quantized to nothing and fail in every later op, so it is refused
// here (the CPU fallback allocates its results through these factories).
void check_not_quantized(std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      !dtype.has_value() || !c10::isQIntType(*dtype), "my_asic cannot hold quantized tensors (", *dtype,
      "): it has no quantized kernels (QuantizedPrivateUse1). Quantize and dequantize on the CPU "
      "(torch.quantize_per_tensor(x.cpu(), ...)), or keep the integer representation (q.int_repr()) on "
      "my_asic.");
}

c10::DeviceIndex target_index(std::optional<c10::Device> device) {
  if (!device.has_value() || !device->has_index()) {
    return current_device();
  }
  check_device_index(device->index());
  return device->index();
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> /*pin_memory*/,
    std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(
      !layout.has_value() || *layout == c10::kStrided,
      "my_asic supports only strided tensors, got layout ", *layout);
  check_not_quantized(dtype);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, target_index(device)));
  return at::detail::empty_generic(
      size, &device_allocator(), kKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> /*pin_memory*/) {
  TORCH_CHECK(
      !layout.has_value() || *layout == c10::kStrided,
      "my_asic supports only strided tensors, got layout ", *layout);
  check_not_quantized(dtype);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, target_index(device)));
  return at::detail::empty_strided_generic(
      size, stride, &device_allocator(), kKeys, c10::dtype_or_default(dtype));
}

// Bytes a tensor of this geometry needs from the start of its storage.
size_t needed_bytes(c10::IntArrayRef size, c10::IntArrayRef stride, int64_t offset, size_t itemsize) {
  return at::detail::computeStorageNbytes(size, stride, itemsize, offset);
}

void ensure_storage(const at::Tensor& self, size_t nbytes) {
  c10::StorageImpl* storage = self.storage().unsafeGetStorageImpl();
  if (nbytes > storage->nbytes()) {
    resize_device_storage(storage, nbytes);
  }
}

const at::Tensor& resize_(
    const at::Tensor& self,
    c10::IntArrayRef size,
    std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  const size_t itemsize = self.element_size();
  if (self.numel() > 0) {
    ensure_storage(self, needed_bytes(self.sizes(), self.strides(), self.storage_offset(), itemsize));
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(
        *memory_format != c10::MemoryFormat::Preserve,
        "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage_offset(
    at::Tensor& self,
    c10::Storage source,
    int64_t storage_offset,
    c10::IntArrayRef size,
    c10::IntArrayRef stride) {
  TORCH_CHECK(
      !source.data() || source.device().type() == c10::DeviceType::PrivateUse1,
      "my_asic: set_() needs a my_asic storage, got one on ", source.device());
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  c10::DimVector strides;
  if (stride.data() == nullptr || stride.empty()) {
    strides = c10::contiguous_strides(size);
  } else {
    strides.assign(stride.begin(), stride.end());
  }
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, strides, storage_offset);
  if (self.numel() > 0) {
    ensure_storage(self, needed_bytes(size, strides, storage_offset, self.element_size()));
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (!self.is_same(source)) {
    set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
  }
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage storage(
      c10::Storage::use_byte_size_t(), 0, device_allocator().allocate_on(self.device().index(), 0),
      &device_allocator(), /*resizable=*/true);
  return set_storage_offset(self, std::move(storage), 0, {0}, {});
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  device_allocator().recordStream(self.storage().data_ptr(), stream);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty_memory_format);
  m.impl("empty_strided", &empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);
  m.impl("view_as_real", &at::native::view_as_real);
  m.impl("view_as_complex", &at::native::view_as_complex);
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage", &set_storage);
  m.impl("set_.source_Storage_storage_offset", &set_storage_offset);
  m.impl("set_.source_Tensor", &set_tensor);
  m.impl("set_", &set_empty);
  m.impl("record_stream", &record_stream);
}

} // namespace kernel_pytorch
