// Process-wide state of the OpenCL runtime: the chosen platform's devices,
// one context for all of them, memory, streams and events.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cl_api.h"
#include "device_memory.h"
#include "handle_registry.h"
#include "kpdr.h"
#include "options.h"
#include "queues.h"

namespace kpdr_opencl {

class KernelCache;

struct Device {
  cl_device_id id = nullptr;
  std::string name;          // reported: "<CL_DEVICE_NAME> (OpenCL)" or names=
  std::string cl_name, vendor, driver_version, device_version, c_version, extensions;
  uint64_t global_memory = 0, capacity = 0, max_alloc = 0;
  int compute_units = 0;
  size_t max_work_group = 0;
};

class Runtime {
 public:
  static kpdrError_t initialize(const char* options);
  // The initialised runtime, or NOT_INITIALIZED (with why) before kpdrInit
  // succeeded or in a forked child.
  static kpdrError_t acquire(Runtime** runtime);
  // True once kpdrInit succeeded (kpdrGetKernels asks before handing out entries).
  static Runtime* get_if_initialized();
  // Only a failed kpdrInit deletes its Runtime; a started one lives until exit
  // (device memory may be freed by other libraries' static destructors).
  ~Runtime();

  const ClApi& cl() const { return *cl_; }
  cl_context context() const { return context_; }
  const Options& options() const { return options_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  const Device& device(int index) const { return devices_[index]; }
  kpdrError_t check_device(int device) const;
  kpdrError_t create_stream(int device, kpdrStream_t* stream);
  kpdrError_t synchronize_device(int device);

  DeviceMemory& device_memory() { return *memory_; }
  PinnedHostMemory& pinned_host_memory() { return *pinned_; }
  HandleRegistry<Stream, kpdrStream_t>& streams() { return streams_; }
  HandleRegistry<Event, kpdrEvent_t>& events() { return events_; }
  KernelCache& kernels() { return *kernels_; }
  // A queue for the runtime's own blocking work (mapping pinned memory, scratch copies).
  cl_command_queue internal_queue() const { return internal_queue_; }

 private:
  Runtime() = default;
  kpdrError_t start(const char* options);
  kpdrError_t select_devices(std::vector<cl_device_id>* chosen, cl_platform_id* platform);
  kpdrError_t describe_device(int index, cl_device_id id);

  const ClApi* cl_ = nullptr;
  Options options_;
  cl_context context_ = nullptr;
  std::vector<Device> devices_;
  cl_command_queue internal_queue_ = nullptr;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<PinnedHostMemory> pinned_;
  HandleRegistry<Stream, kpdrStream_t> streams_;
  HandleRegistry<Event, kpdrEvent_t> events_;
  std::unique_ptr<KernelCache> kernels_;
};

// Device info helpers shared with the kernel cache.
std::string device_text(const ClApi& cl, cl_device_id device, cl_device_info what);

}  // namespace kpdr_opencl
