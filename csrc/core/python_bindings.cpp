// torch.my_asic's device, memory, stream and generator calls: thin wrappers
// over the device core, added to kernel_pytorch._C by csrc/python/module.cpp.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "core/core.h"
#include "allocator_config.h"
#include "error_handler.h"

namespace kernel_pytorch {
namespace {

py::dict device_properties_dict(c10::DeviceIndex index) {
  const auto& p = device_properties(index);
  py::dict d;
  d["name"] = std::string(p.name);
  d["total_memory"] = p.total_memory;
  d["multi_processor_count"] = p.compute_units;
  d["host_addressable"] = p.host_addressable != 0;
  return d;
}

// The same flat keys as torch.cuda.memory_stats().
py::dict memory_stats_dict(c10::DeviceIndex index) {
  const auto stats = device_allocator().getDeviceStats(index);
  py::dict d;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add = [&](const char* name, const c10::CachingAllocator::StatArray& a) {
    for (int i = 0; i < 3; ++i) {
      const std::string prefix = std::string(name) + "." + pools[i] + ".";
      d[py::str(prefix + "current")] = a[i].current;
      d[py::str(prefix + "peak")] = a[i].peak;
      d[py::str(prefix + "allocated")] = a[i].allocated;
      d[py::str(prefix + "freed")] = a[i].freed;
    }
  };
  add("allocation", stats.allocation);
  add("segment", stats.segment);
  add("active", stats.active);
  add("allocated_bytes", stats.allocated_bytes);
  add("reserved_bytes", stats.reserved_bytes);
  add("active_bytes", stats.active_bytes);
  add("requested_bytes", stats.requested_bytes);
  d["num_alloc_retries"] = stats.num_alloc_retries;
  d["num_ooms"] = stats.num_ooms;
  d["num_device_alloc"] = stats.num_device_alloc;
  d["num_device_free"] = stats.num_device_free;
  auto add_stat = [&](const char* name, const c10::CachingAllocator::Stat& st) {
    d[py::str(std::string(name) + ".current")] = st.current;
    d[py::str(std::string(name) + ".peak")] = st.peak;
    d[py::str(std::string(name) + ".allocated")] = st.allocated;
    d[py::str(std::string(name) + ".freed")] = st.freed;
  };
  add_stat("oversize_allocations", stats.oversize_allocations);
  add_stat("oversize_segments", stats.oversize_segments);
  d["max_split_size"] = stats.max_split_size; // -1: no cap, as torch.cuda reports it
  // The allocator's settings (MY_ASIC_ALLOC_CONF): bytes, -1 where there is no cap.
  const auto settings = allocator_settings();
  const size_t limit = device_pool_limit(index);
  d["max_pool_size"] = settings.max_pool_size == kNoLimit ? -1 : static_cast<int64_t>(settings.max_pool_size);
  d["pool_limit"] = limit == kNoLimit ? -1 : static_cast<int64_t>(limit);
  d["initial_pool_size"] = settings.initial_pool_size;
  d["growth_factor"] = settings.growth_factor;
  d["garbage_collection_threshold"] = settings.garbage_collection_threshold;
  return d;
}

py::tuple stream_tuple(const c10::Stream& s) {
  return py::make_tuple(
      s.id(), static_cast<int>(s.device_index()), static_cast<int>(s.device_type()));
}

// A device index from Python, checked before it is narrowed to
// c10::DeviceIndex (int8), where 256 would silently become device 0.
c10::DeviceIndex device_arg(int64_t index) {
  const int64_t count = device_count();
  TORCH_CHECK(
      index >= 0 && index < count, "my_asic: invalid device index ", index, ": this process has ", count,
      " my_asic device(s) (valid indices 0..", count - 1, "). Check torch.my_asic.device_count().");
  return static_cast<c10::DeviceIndex>(index);
}

// A Python callable held from C++: released with the GIL, called with it.
struct PyCallable {
  py::object fn;
  explicit PyCallable(py::object f) : fn(std::move(f)) {}
  ~PyCallable() {
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
  // Calls fn(args...) with the GIL; a Python exception becomes a C++ one.
  template <class... A>
  py::object call(A&&... args) {
    py::gil_scoped_acquire gil;
    try {
      return fn(std::forward<A>(args)...);
    } catch (py::error_already_set& e) {
      throw std::runtime_error(e.what());
    }
  }
};

// torch.my_asic.set_error_handler's C++ side: fn receives a dict (device,
// kind, message, op, requested_bytes, retryable) and returns truthy to ask
// for one retry.
void set_error_handler(py::object fn) {
  if (fn.is_none()) {
    set_device_error_handler(nullptr);
    return;
  }
  auto holder = std::make_shared<PyCallable>(std::move(fn));
  set_device_error_handler([holder](const DeviceErrorInfo& info) {
    py::gil_scoped_acquire gil;
    py::dict d;
    d["device"] = static_cast<int>(info.device);
    d["kind"] = info.kind;
    d["message"] = info.message;
    d["op"] = info.op;
    d["requested_bytes"] = info.requested_bytes;
    d["retryable"] = info.retryable;
    return py::bool_(holder->call(d)).cast<bool>();
  });
}

void set_usage_watch_py(int64_t device, size_t threshold_bytes, py::object fn) {
  if (fn.is_none()) {
    set_usage_watch(static_cast<c10::DeviceIndex>(device), threshold_bytes, nullptr);
    return;
  }
  auto holder = std::make_shared<PyCallable>(std::move(fn));
  set_usage_watch(static_cast<c10::DeviceIndex>(device), threshold_bytes, [holder](size_t used, size_t total) {
    holder->call(used, total);
  });
}

} // namespace

void init_core_bindings(py::module_& m) {
  m.def("_set_runtime", &set_runtime_config, py::arg("library_path"), py::arg("options"));
  m.def("_runtime_library", &runtime_library_path);
  m.def("_runtime_options", &runtime_options);
  m.def("_is_initialized", &runtime_initialized);
  m.def("_in_bad_fork", &in_bad_fork);
  m.def("_device_count", [] { return static_cast<int>(device_count_noexcept()); });
  m.def("_get_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int64_t i) { set_current_device(device_arg(i)); });
  m.def("_get_device_properties", [](int64_t i) { return device_properties_dict(device_arg(i)); });
  m.def("_synchronize", [](int64_t i) {
    const auto d = device_arg(i);
    py::gil_scoped_release no_gil;
    KPDR_CHECK(rt().DeviceSynchronize(d));
  });
  // Inductor's wrapper calls this before each C++ kernel of a my_asic graph
  // (asic/inductor.py): an atomic compare when the stream is idle.
  m.def("_wait_current_stream", [](int64_t i) {
    const auto d = device_arg(i);
    py::gil_scoped_release no_gil;
    wait_current_stream(d);
  });
  m.def("_mem_get_info", [](int64_t i) { return device_allocator().getMemoryInfo(device_arg(i)); });
  m.def("_memory_stats", [](int64_t i) { return memory_stats_dict(device_arg(i)); });
  m.def("_reset_peak_memory_stats", [](int64_t i) { device_allocator().resetPeakStats(device_arg(i)); });
  m.def("_reset_accumulated_memory_stats", [](int64_t i) { device_allocator().resetAccumulatedStats(device_arg(i)); });
  m.def("_empty_cache", [] { device_allocator().emptyCache(); });
  m.def("_set_error_handler", &set_error_handler);
  m.def("_set_usage_watch", [](int64_t i, size_t threshold_bytes, py::object fn) {
    set_usage_watch_py(device_arg(i), threshold_bytes, std::move(fn));
  });
  m.def("_set_allocator_settings", [](const std::string& conf) { set_allocator_settings(conf); });
  m.def("_get_allocator_settings", [] { return allocator_settings_string(); });
  m.def("_set_memory_fraction", [](double f, int64_t i) { device_allocator().setMemoryFraction(f, device_arg(i)); });
  m.def("_get_memory_fraction", [](int64_t i) { return device_allocator().getMemoryFraction(device_arg(i)); });
  m.def("_get_default_generator", [](int64_t i) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(device_arg(i))));
  });
  m.def("_current_stream", [](int64_t i) { return stream_tuple(current_stream(device_arg(i))); });
  m.def("_default_stream", [](int64_t i) { return stream_tuple(default_stream(device_arg(i))); });
  m.def("_stream_priority", [](int64_t id, int64_t device) {
    return stream_priority(c10::Stream(
        c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device_arg(device)), id));
  });
  m.def("_set_stream", [](int64_t id, int64_t device) {
    exchange_current_stream(c10::Stream(
        c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device_arg(device)), id));
  });
}

} // namespace kernel_pytorch
