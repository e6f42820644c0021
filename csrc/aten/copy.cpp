// Copies to, from and between my_asic devices (Tensor.copy_, .to(), .cpu()).
//
// Bytes only move through kpdrMemcpyAsync. Dense tensors move as one span in
// their own layout; dtype and layout conversions happen on the host side or,
// for device-to-device, with the host view of device memory when the runtime
// allows it. non_blocking=True returns before the copy ends only when the
// host side is pinned memory, as in CUDA.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/ATen.h>
#include <ATen/ops/copy_native.h>
#include <torch/library.h>

#include "core/core.h"
#include "native/runtime_pointwise.h"

namespace kernel_pytorch {
namespace {

bool is_device(const at::Tensor& t) {
  return t.device().type() == c10::DeviceType::PrivateUse1;
}

size_t span_bytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// Same element type and byte layout: one memcpy moves the data.
bool same_bytes_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
      a.is_non_overlapping_and_dense() && !a.is_conj() && !b.is_conj() && !a.is_neg() && !b.is_neg();
}

// A copy the host thread makes in device memory (host addressable), in stream
// order: recorded as device work while the profiler records it.
template <typename Copy>
void copy_on_host(activity::Kind kind, const at::Tensor& device_side, Copy&& copy) {
  activity::HostWork work;
  if (activity::recording() && !in_host_kernel()) {
    work.begin(kind, span_bytes(device_side), current_stream(device_side.device().index()));
  }
  copy();
}

// Elements between t's first and last element, in storage order.
int64_t spanned_elements(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.size(i) == 0) {
      return 0;
    }
    n += (t.size(i) - 1) * t.stride(i);
  }
  return n;
}

// A host copy of every byte t spans, viewed with t's geometry. Used when
// device memory is not host addressable and t has gaps or overlaps.
at::Tensor host_copy_spanned(const at::Tensor& t) {
  auto buffer = at::empty({spanned_elements(t)}, t.options().device(c10::kCPU));
  const auto stream = current_stream(t.device().index());
  memcpy_async(buffer.mutable_data_ptr(), t.const_data_ptr(), buffer.numel() * t.element_size(),
            KPDR_MEMCPY_DEVICE_TO_HOST, stream);
  synchronize_stream(stream);
  return buffer.as_strided(t.sizes(), t.strides(), 0);
}

void host_to_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const auto d = dst.device().index();
  if (!dst.is_non_overlapping_and_dense()) {
    if (host_addressable()) {
      wait_current_stream(d);
      copy_on_host(activity::Kind::MemcpyHtoD, dst, [&] { host_alias(dst).copy_(src); });
      return;
    }
    // Read-modify-write the bytes dst spans, so gaps keep their contents.
    at::Tensor spanned = host_copy_spanned(dst);
    spanned.copy_(src);
    const auto stream = current_stream(d);
    memcpy_async(dst.data_ptr(), spanned.const_data_ptr(), spanned_elements(dst) * dst.element_size(),
              KPDR_MEMCPY_HOST_TO_DEVICE, stream);
    synchronize_stream(stream);
    return;
  }
  at::Tensor host = src;
  if (!same_bytes_layout(src, dst)) {
    host = at::empty_strided(dst.sizes(), dst.strides(), src.options().dtype(dst.dtype()));
    host.copy_(src);
  }
  const auto stream = current_stream(d);
  memcpy_async(dst.data_ptr(), host.const_data_ptr(), span_bytes(dst), KPDR_MEMCPY_HOST_TO_DEVICE, stream);
  if (non_blocking && host.is_same(src) && is_pinned_ptr(host.const_data_ptr())) {
    // The pinned buffer must outlive the copy: tell the pinned allocator.
    host_allocator()->record_event(
        host.storage().mutable_data(), host.storage().data_ptr().get_context(), stream);
    return;
  }
  synchronize_stream(stream);
}

void device_to_host(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const auto d = src.device().index();
  if (!src.is_non_overlapping_and_dense()) {
    if (host_addressable()) {
      wait_current_stream(d);
      copy_on_host(activity::Kind::MemcpyDtoH, src, [&] { dst.copy_(host_alias(src)); });
    } else {
      dst.copy_(host_copy_spanned(src));
    }
    return;
  }
  const bool direct = same_bytes_layout(src, dst);
  at::Tensor host = direct ? dst
                           : at::empty_strided(src.sizes(), src.strides(), dst.options().dtype(src.dtype()));
  const auto stream = current_stream(d);
  memcpy_async(host.mutable_data_ptr(), src.const_data_ptr(), span_bytes(src), KPDR_MEMCPY_DEVICE_TO_HOST, stream);
  if (direct && non_blocking && is_pinned_ptr(host.const_data_ptr())) {
    host_allocator()->record_event(
        host.storage().mutable_data(), host.storage().data_ptr().get_context(), stream);
    return;
  }
  synchronize_stream(stream);
  if (!direct) {
    dst.copy_(host);
  }
}

void device_to_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const auto sd = src.device().index();
  const auto dd = dst.device().index();
  if (sd == dd) {
    if (same_bytes_layout(src, dst)) {
      const auto stream = current_stream(sd);
      if (host_addressable() && query_stream(stream)) {
        // Nothing is queued before it, so copying on this thread keeps stream
        // order and spares the round trip through the runtime's stream that
        // the next CPU kernel would wait for (a reshape's clone, say).
        copy_on_host(activity::Kind::MemcpyDtoD, dst, [&] { host_alias(dst).copy_(host_alias(src)); });
        return;
      }
      // Ordered on the stream like any device work; no host wait needed.
      memcpy_async(dst.data_ptr(), src.const_data_ptr(), span_bytes(src), KPDR_MEMCPY_DEVICE_TO_DEVICE, stream);
      return;
    }
    if (host_addressable()) {
      wait_current_stream(sd);
      copy_on_host(activity::Kind::MemcpyDtoD, dst, [&] { host_alias(dst).copy_(host_alias(src)); });
      return;
    }
    // Layout or dtype change without host access: the runtime's pointwise
    // entry where it has one, else a round trip through the host.
    if (native::runtime_pointwise_copy(src, dst)) {
      return;
    }
    host_to_device(src.is_non_overlapping_and_dense() ? src.cpu() : host_copy_spanned(src), dst, false);
    return;
  }
  if (!same_bytes_layout(src, dst)) {
    // Move the bytes in src's layout, then convert on the destination device.
    at::Tensor dense_src = src.is_non_overlapping_and_dense() && !src.is_conj() && !src.is_neg()
        ? src
        : src.contiguous();
    auto staged = at::empty_strided(dense_src.sizes(), dense_src.strides(), dense_src.options().device(dst.device()));
    device_to_device(dense_src, staged, false);
    dst.copy_(staged);
    return;
  }
  // Across devices: wait for pending work on the destination, copy on the
  // source's stream, and wait for the copy (simple and always ordered).
  wait_current_stream(dd);
  const auto stream = current_stream(sd);
  memcpy_async(dst.data_ptr(), src.const_data_ptr(), span_bytes(src), KPDR_MEMCPY_DEVICE_TO_DEVICE, stream);
  synchronize_stream(stream);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(
      self.defined() && dst.defined(), "my_asic copy: both tensors must be defined");
  if (dst.numel() == 0) {
    return dst;
  }
  at::Tensor src = self;
  if (src.sizes() != dst.sizes()) {
    src = src.expand(dst.sizes());
  }
  // copy_ (below) strips the conjugate/negative bits before calling us.
  TORCH_INTERNAL_ASSERT(
      !src.is_conj() && !src.is_neg() && !dst.is_conj() && !dst.is_neg(),
      "my_asic: _copy_from reached with a conjugate or negative view");
  if (is_device(src) && is_device(dst)) {
    device_to_device(src, dst, non_blocking);
  } else if (is_device(dst)) {
    TORCH_CHECK(src.device().is_cpu(), "my_asic: cannot copy from ", src.device(), " to ", dst.device(),
                "; copy through the CPU (.cpu()) first.");
    host_to_device(src, dst, non_blocking);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "my_asic: cannot copy from ", src.device(), " to ", dst.device(),
                "; copy through the CPU (.cpu()) first.");
    device_to_host(src, dst, non_blocking);
  }
  return dst;
}

// A view of t's bytes without its conjugate/negative bit (same storage,
// sizes, strides, offset), so the bytes can be moved as they are.
at::Tensor physical_alias(const at::Tensor& t) {
  const auto key = is_device(t) ? c10::DispatchKey::PrivateUse1 : c10::DispatchKey::CPU;
  auto alias = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(t.storage()), c10::DispatchKeySet(key), t.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return alias;
}

// Tensor.copy_ when either side is on my_asic.
//
// Conjugate and negative views must not reach _copy_from: the Conjugate
// key's fallback would materialise them with clone(), whose copy_ calls
// _copy_from with the same view again (endless recursion, a SIGSEGV). CUDA
// never meets this because copy_ handles it without _copy_from. So the bytes
// are copied as they are and the destination fixed up where it lives:
// logical(dst) = logical(src) needs phys(dst) = conj^(cs^cd) neg^(ns^nd) phys(src).
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  const bool bits = self.is_conj() || self.is_neg() || src.is_conj() || src.is_neg();
  const auto plain = [](const at::Tensor& t) { return t.device().is_cpu() || is_device(t); };
  if (!bits || !plain(self) || !plain(src)) {
    if (bits) {
      // Another device on one side: copy_from rejects the pair with a clear error.
      return at::native::copy_(self, src.resolve_conj().resolve_neg(), non_blocking);
    }
    return at::native::copy_(self, src, non_blocking);
  }
  at::Tensor dst = physical_alias(self);
  // Synchronous: the fix-up below runs on the copied bytes.
  at::native::copy_(dst, physical_alias(src), /*non_blocking=*/false);
  if (self.is_conj() != src.is_conj() && dst.is_complex()) {
    dst.conj_physical_();
  }
  if (self.is_neg() != src.is_neg()) {
    dst.neg_();
  }
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  auto host = at::empty({}, self.options().device(c10::kCPU));
  const auto stream = current_stream(self.device().index());
  memcpy_async(host.mutable_data_ptr(), self.const_data_ptr(), self.element_size(), KPDR_MEMCPY_DEVICE_TO_HOST, stream);
  synchronize_stream(stream);
  return at::_local_scalar_dense(host);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("copy_", &copy_);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
}

} // namespace kernel_pytorch
