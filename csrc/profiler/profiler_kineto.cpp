// my_asic device activity in torch.profiler traces (Kineto).
//
// torch.profiler.profile(activities=[ProfilerActivity.CPU,
// ProfilerActivity.PrivateUse1]) asks Kineto for device activities. PyTorch
// hands Kineto the IActivityProfiler a PrivateUse1 backend registers with
// REGISTER_PRIVATEUSE1_PROFILER (torch/csrc/profiler/standalone/
// privateuse1_profiler.h); Kineto opens one session of it per trace, forwards
// the correlation id of every PyTorch op as it starts and ends, and at the end
// asks the session for its activities. This session records the device work
// core and the glue start (device_activity.h) and reports, per piece of work:
//
// - the device side: CONCURRENT_KERNEL (a runtime kernel, or a native kernel
//   run on device memory) or GPU_MEMCPY, with device = my_asic index and
//   resource = stream id, linked to the PyTorch op that started it (so
//   key_averages() counts its time as that op's my_asic time);
// - the host side: a PRIVATEUSE1_RUNTIME activity for the submitting call on
//   the op's thread, starting a CPU-to-device flow ("ac2g") that ends at the
//   device activity, as CUDA's cudaLaunchKernel does.
//
// Built only against a PyTorch that ships Kineto's headers (it was built with
// Kineto; setup.py puts them on the include path) and the PrivateUse1
// profiler registry (privateuse1_profiler.h, in torch 2.13). Elsewhere torch.profiler reports
// no my_asic device activity; use_device="my_asic" (profiler.cpp)
// still times every op.
#include "profiler.h"

#include <torch/extension.h>

#if __has_include(<libkineto.h>) && __has_include(<torch/csrc/profiler/standalone/privateuse1_profiler.h>)

// The registry's declarations are compiled only under USE_KINETO, the macro
// PyTorch itself was built with; its Kineto headers being here says it was.
#ifndef USE_KINETO
#define USE_KINETO 1
#endif
// GenericTraceActivity::addMetadata formats with fmt, whose compiled part
// libtorch keeps private: compile the little we use here.
#ifndef FMT_HEADER_ONLY
#define FMT_HEADER_ONLY
#endif

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <c10/util/ApproximateClock.h>
#include <c10/util/Logging.h>
#include <libkineto.h>
#include <output_base.h>

#include <map>
#include <set>

#include "device_activity.h"
#include "core/core.h"

namespace kernel_pytorch {
namespace {

using libkineto::ActivityType;

const char* memcpy_name(activity::Kind kind) {
  switch (kind) {
    case activity::Kind::MemcpyHtoD:
      return "Memcpy HtoD (my_asic)";
    case activity::Kind::MemcpyDtoH:
      return "Memcpy DtoH (my_asic)";
    default:
      return "Memcpy DtoD (my_asic)";
  }
}

bool is_kernel(activity::Kind kind) {
  return kind == activity::Kind::RuntimeKernel || kind == activity::Kind::HostKernel;
}

class MyAsicActivitySession final : public libkineto::IActivityProfilerSession {
 public:
  explicit MyAsicActivitySession(std::set<ActivityType> types) : types_(std::move(types)) {}

  ~MyAsicActivitySession() override {
    if (recording_) {
      activity::stop(nullptr);
    }
  }

  void start() override {
    try {
      activity::start();
      recording_ = true;
      start_ns_ = c10::getTime();
      status_ = libkineto::TraceStatus::RECORDING;
    } catch (const std::exception& e) {
      errors_.push_back(std::string("my_asic: cannot start recording device activity: ") + e.what());
      status_ = libkineto::TraceStatus::ERROR;
    }
  }

  void stop() override {
    if (!recording_) {
      return;
    }
    recording_ = false;
    end_ns_ = c10::getTime();
    std::vector<std::string> problems;
    records_ = activity::stop(&problems);
    for (auto& p : problems) {
      errors_.push_back("my_asic: " + p);
    }
    status_ = errors_.empty() ? libkineto::TraceStatus::PROCESSING : libkineto::TraceStatus::WARNING;
  }

  std::vector<std::string> errors() override {
    return errors_;
  }

  void pushCorrelationId(uint64_t id) override {
    activity::push_correlation(id);
  }
  void popCorrelationId() override {
    activity::pop_correlation();
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(
      libkineto::ActivityLogger& logger,
      libkineto::getLinkedActivityCallback linked_op,
      int64_t /*start_time*/,
      int64_t /*end_time*/) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_, std::max(end_ns_, start_ns_), "my_asic");
    buffer_->gpuOpCount = -1;
    const int32_t pid = libkineto::processId();
    int32_t flow = 0;
    for (const auto& r : records_) {
      if (r.kind == activity::Kind::MemcpyHtoD || r.kind == activity::Kind::MemcpyDtoH ||
          r.kind == activity::Kind::MemcpyDtoD) {
        if (!types_.count(ActivityType::GPU_MEMCPY)) continue;
      } else if (!types_.count(ActivityType::CONCURRENT_KERNEL)) {
        continue;
      }
      const libkineto::ITraceActivity* op = r.correlation != 0 ? linked_op(static_cast<int32_t>(r.correlation)) : nullptr;
      ++flow;
      std::string name;
      if (r.kind == activity::Kind::HostKernel) {
        // A native kernel is ATen's kernel for its op, run on device memory.
        name = std::string("my_asic host kernel: ") + (op != nullptr ? op->name() : std::string("unknown op"));
      } else if (r.kind == activity::Kind::RuntimeKernel) {
        name = "my_asic runtime kernel: " + r.name;
      } else {
        name = memcpy_name(r.kind);
      }

      if (types_.count(ActivityType::PRIVATEUSE1_RUNTIME)) {
        const char* call = r.kind == activity::Kind::HostKernel ? "my_asic host kernel launch"
            : is_kernel(r.kind)                                 ? "my_asic kernel launch"
                                                                : "kpdrMemcpyAsync";
        buffer_->emplace_activity(buffer_->span, ActivityType::PRIVATEUSE1_RUNTIME, call);
        auto& host = *buffer_->activities.back();
        host.startTime = r.submit_start_ns;
        host.endTime = std::max(r.submit_end_ns, r.submit_start_ns);
        host.id = flow;
        host.device = pid;
        host.resource = r.thread;
        host.threadId = r.thread;
        host.linked = op;
        host.flow.id = static_cast<uint32_t>(flow);
        host.flow.type = libkineto::kLinkAsyncCpuGpu;
        host.flow.start = 1;
        host.addMetadata("correlation", flow);
        host.log(logger);
      }

      buffer_->emplace_activity(
          buffer_->span, is_kernel(r.kind) ? ActivityType::CONCURRENT_KERNEL : ActivityType::GPU_MEMCPY, name);
      auto& dev = *buffer_->activities.back();
      dev.startTime = r.start_ns;
      dev.endTime = std::max(r.end_ns, r.start_ns);
      dev.id = flow;
      dev.device = r.device;
      dev.resource = static_cast<int32_t>(r.stream);
      dev.threadId = r.thread;
      dev.linked = op;
      dev.flow.id = static_cast<uint32_t>(flow);
      dev.flow.type = libkineto::kLinkAsyncCpuGpu;
      dev.flow.start = 0;
      dev.addMetadata("device", static_cast<int>(r.device));
      dev.addMetadata("stream", static_cast<int64_t>(r.stream));
      dev.addMetadata("correlation", flow);
      if (!is_kernel(r.kind)) {
        dev.addMetadata("bytes", r.bytes);
        const int64_t ns = dev.endTime - dev.startTime;
        if (ns > 0) {
          dev.addMetadata("memory bandwidth (GB/s)", static_cast<double>(r.bytes) / static_cast<double>(ns));
        }
      }
      dev.log(logger);
      streams_.emplace(r.device, r.stream);
    }
    records_.clear();
    // Kineto's callback takes one device; name every device used here.
    std::set<c10::DeviceIndex> devices;
    for (const auto& [device, stream] : streams_) {
      devices.insert(device);
    }
    bool first = true;
    for (c10::DeviceIndex d : devices) {
      if (first) {
        first_device_ = d;
        first = false;
        continue;
      }
      logger.handleDeviceInfo(device_info(d), 0);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (first_device_ < 0) {
      return nullptr;
    }
    return std::make_unique<libkineto::DeviceInfo>(device_info(first_device_));
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : streams_) {
      out.push_back(libkineto::ResourceInfo{
          stream, stream, device, stream == 0 ? std::string("stream 0 (default)") : "stream " + std::to_string(stream)});
    }
    return out;
  }

  // The activities stay owned by this buffer, which Kineto keeps with the trace.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

 private:
  static libkineto::DeviceInfo device_info(c10::DeviceIndex d) {
    std::string label = "my_asic " + std::to_string(d);
    try {
      label += " (" + std::string(device_properties(d).name) + ")";
    } catch (const std::exception&) {
    }
    // Sorted after the host's rows, as Kineto sorts GPUs.
    return libkineto::DeviceInfo{d, 0x1000000 + d, "my_asic", label};
  }

  std::set<ActivityType> types_;
  bool recording_ = false;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  std::vector<std::string> errors_;
  std::vector<activity::Record> records_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<std::pair<c10::DeviceIndex, c10::StreamId>> streams_;
  c10::DeviceIndex first_device_ = -1;
};

class MyAsicActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    static const std::string kName = "my_asic";
    return kName;
  }

  const std::set<ActivityType>& availableActivities() const override {
    static const std::set<ActivityType> kTypes{
        ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::PRIVATEUSE1_RUNTIME};
    return kTypes;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& requested,
      const libkineto::Config& /*config*/) override {
    // CPU-only traces request PRIVATEUSE1_RUNTIME among the host types; a
    // session (and its device synchronisation) only when device work is asked for.
    std::set<ActivityType> types;
    for (ActivityType t : availableActivities()) {
      if (requested.count(t)) {
        types.insert(t);
      }
    }
    if (!types.count(ActivityType::CONCURRENT_KERNEL) && !types.count(ActivityType::GPU_MEMCPY)) {
      return nullptr;
    }
    return std::make_unique<MyAsicActivitySession>(std::move(types));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/,
      int64_t /*duration_ms*/,
      const std::set<ActivityType>& requested,
      const libkineto::Config& config) override {
    return configure(requested, config);
  }
};

REGISTER_PRIVATEUSE1_PROFILER(MyAsicActivityProfiler);

} // namespace
} // namespace kernel_pytorch

#define KP_DEVICE_ACTIVITY_PROFILER 1
#endif // Kineto and the PrivateUse1 profiler registry

namespace kernel_pytorch {

void init_profiler_bindings(py::module_& m) {
#ifdef KP_DEVICE_ACTIVITY_PROFILER
  m.def("_device_activity_profiler_built", [] { return true; });
#else
  m.def("_device_activity_profiler_built", [] { return false; });
#endif
}

} // namespace kernel_pytorch
