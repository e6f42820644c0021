// c10::impl::DeviceGuardImplInterface for my_asic: current device, streams and
// events. torch.Stream, torch.Event, torch.accelerator.* and every
// DeviceGuard/OptionalDeviceGuard in ATen route through this.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "core/core.h"

namespace kernel_pytorch {
namespace {

// torch.Stream("my_asic") passes a Device without an index; as in CUDA's guard,
// that means the current device.
c10::DeviceIndex index_or_current(c10::Device d) {
  return d.has_index() ? d.index() : current_device();
}

struct MyAsicGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override {
    return kType;
  }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    auto old = current_device();
    if (old != d.index()) {
      set_current_device(d.index());
    }
    return c10::Device(kType, old);
  }

  c10::Device getDevice() const override {
    return c10::Device(kType, current_device());
  }

  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    set_current_device(d.index());
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(d.index());
    } catch (...) {
      // Only used to restore a device that was valid before; nothing to do.
    }
  }

  c10::Stream getStream(c10::Device d) const override {
    return current_stream(index_or_current(d));
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    return default_stream(index_or_current(d));
  }

  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    return stream_from_pool(index_or_current(d), priority);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override {
    return stream_from_pool(index_or_current(d), isHighPriority ? -1 : 0);
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    return exchange_current_stream(s);
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count_noexcept();
  }

  // torch.accelerator.get_device_capability(). kpdrDeviceProperties carries
  // no dtype restrictions (a kernel a device lacks runs on the CPU fallback),
  // so an existing device supports the scalar types the CPU reports, less the
  // quantized ones: quantized tensors need QuantizedPrivateUse1 kernels,
  // which kernel_pytorch does not provide (the factories and the CPU fallback
  // refuse quantized results with that reason). For comparison, torch 2.13's
  // CUDA guard reports no capability at all, and XPU's and MPS's list no
  // quantized dtype; OpenReg's returns the all-dtypes default.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device_index(index_or_current(d));
    c10::DeviceCapability cap;
    auto& types = cap.capability_data.supported_scalar_types;
    types.has_QInt8 = 0;
    types.has_QUInt8 = 0;
    types.has_QInt32 = 0;
    types.has_QUInt4x2 = 0;
    types.has_QUInt2x4 = 0;
    return cap;
  }

  // --- events: `void*` holds a kpdrEvent_t created on first record.
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    if (event == nullptr || !runtime_initialized()) {
      return;
    }
    rt().EventDestroy(static_cast<kpdrEvent_t>(event));
  }

  void record(
      void** event,
      const c10::Stream& stream,
      const c10::DeviceIndex device_index,
      const c10::EventFlag flag) const override {
    TORCH_CHECK(
        device_index == -1 || device_index == stream.device_index(),
        "my_asic: event device index ", static_cast<int>(device_index),
        " does not match the recording stream's device ", static_cast<int>(stream.device_index()),
        ". An event must be recorded on streams of the device it was first recorded on.");
    const auto& api = rt();
    if (*event == nullptr) {
      // As in CUDA: PYTORCH_DEFAULT events skip timing (cheaper), BACKEND_DEFAULT
      // (torch.Event(enable_timing=True)) keeps it.
      const unsigned flags =
          flag == c10::EventFlag::BACKEND_DEFAULT ? KPDR_EVENT_DEFAULT : KPDR_EVENT_DISABLE_TIMING;
      kpdrEvent_t created = nullptr;
      KPDR_CHECK(api.EventCreate(stream.device_index(), flags, &created));
      *event = created;
    }
    KPDR_CHECK(api.EventRecord(static_cast<kpdrEvent_t>(*event), native_stream(stream)));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return; // never recorded: nothing to wait for
    }
    stream_wait_event(stream, static_cast<kpdrEvent_t>(event));
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    const kpdrError_t err = rt().EventQuery(static_cast<kpdrEvent_t>(event));
    if (err == KPDR_ERROR_NOT_READY) {
      return false;
    }
    KPDR_CHECK(err);
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) {
      return;
    }
    KPDR_CHECK(rt().EventSynchronize(static_cast<kpdrEvent_t>(event)));
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(
        start != nullptr && end != nullptr,
        "my_asic: both events must be recorded before elapsed_time() is called.");
    float ms = 0.0f;
    KPDR_CHECK(rt().EventElapsedTime(&ms, static_cast<kpdrEvent_t>(start), static_cast<kpdrEvent_t>(end)));
    return static_cast<double>(ms);
  }

  bool queryStream(const c10::Stream& stream) const override {
    return query_stream(stream);
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    synchronize_stream(stream);
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check_device_index(device_index);
    KPDR_CHECK(rt().DeviceSynchronize(device_index));
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    device_allocator().recordStream(data_ptr, stream);
  }
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, MyAsicGuardImpl);

} // namespace kernel_pytorch
