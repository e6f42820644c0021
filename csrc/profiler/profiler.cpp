// my_asic device timing for the PyTorch profiler.
//
// torch.autograd.profiler.profile(use_device="my_asic") runs in the
// KINETO_PRIVATEUSE1_FALLBACK state: at every op's entry and exit the
// profiler asks the PrivateUse1 ProfilerStubs to record an event on the
// device, and when the results are read it asks for the time between the
// two (the op's my_asic time in key_averages(), "self my_asic time"). These
// stubs record runtime events (kpdrEventRecord, timing enabled) on the
// current stream, as torch's CUDA stubs record CUDA events.
//
// Failures never escape into the profiled op: an event that cannot be
// recorded is left empty (the profiler then reports no device time for that
// op) and a pair that cannot be timed measures 0.
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/Logging.h>

#include <atomic>

#include "core/core.h"

namespace kernel_pytorch {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

void destroy_event(void* event) {
  if (event != nullptr && runtime_initialized()) {
    rt().EventDestroy(static_cast<kpdrEvent_t>(event));
  }
}

void warn_once(const char* what, const std::exception& e) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    LOG(WARNING) << "my_asic profiler: " << what << ": " << e.what()
                 << " (reported once; those ops show no my_asic time)";
  }
}

struct MyAsicProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    try {
      const c10::DeviceIndex d = current_device();
      const auto& api = rt();
      kpdrEvent_t created = nullptr;
      KPDR_CHECK(api.EventCreate(d, KPDR_EVENT_DEFAULT, &created));
      *event = ProfilerVoidEventStub(created, &destroy_event);
      if (device != nullptr) {
        *device = d;
      }
      if (cpu_ns != nullptr) {
        *cpu_ns = c10::getTime();
      }
      KPDR_CHECK(api.EventRecord(created, native_stream(current_stream(d))));
    } catch (const std::exception& e) {
      event->reset();
      warn_once("cannot record a device event", e);
    }
  }

  // Microseconds, as the CUDA stubs answer.
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    if (start == nullptr || end == nullptr || !*start || !*end) {
      return 0.0f;
    }
    try {
      const auto& api = rt();
      auto* a = static_cast<kpdrEvent_t>(start->get());
      auto* b = static_cast<kpdrEvent_t>(end->get());
      KPDR_CHECK(api.EventSynchronize(a));
      KPDR_CHECK(api.EventSynchronize(b));
      float ms = 0.0f;
      KPDR_CHECK(api.EventElapsedTime(&ms, a, b));
      return ms > 0.0f ? ms * 1000.0f : 0.0f;
    } catch (const std::exception& e) {
      warn_once("cannot time a pair of device events", e);
      return 0.0f;
    }
  }

  // The kpdr ABI has no annotation calls (nothing like NVTX) to forward to.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < device_count_noexcept(); ++d) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, d));
      op(d);
    }
  }

  void synchronize() const override {
    for (c10::DeviceIndex d = 0; d < device_count_noexcept(); ++d) {
      KPDR_CHECK(rt().DeviceSynchronize(d));
    }
  }
};

const bool kRegistered = [] {
  static MyAsicProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

} // namespace
} // namespace kernel_pytorch
