// The ATen glue's Python calls (device initialisation, the CPU fallback's
// mode and counts, native-kernel and autograd-thread introspection): thin
// wrappers, added to kernel_pytorch._C by csrc/python/module.cpp.
#include <torch/extension.h>

#include "aten/aten.h"
#include "autograd_device_threads.h"
#include "autograd_exit.h"
#include "device_init.h"
#include "native/host_kernels.h"

namespace kernel_pytorch {
namespace {

FallbackMode parse_mode(const std::string& mode) {
  if (mode == "allow") return FallbackMode::kAllow;
  if (mode == "warn") return FallbackMode::kWarn;
  if (mode == "raise") return FallbackMode::kRaise;
  TORCH_CHECK_VALUE(false, "fallback mode must be 'allow', 'warn' or 'raise', got '", mode, "'");
}

} // namespace

void init_aten_bindings(py::module_& m) {
  m.def("_init", &initialize_device);
  m.def("_device_initialized", &device_initialized);
  m.def("_intra_op_threads_limited", &intra_op_threads_limited);
  m.def("_native_kernels", [] {
    return py::make_tuple(native::host_kernel_names(), native::cpu_stubs_in_use());
  });
  m.def("_drain_autograd_device_threads", &drain_autograd_device_threads,
        py::call_guard<py::gil_scoped_release>());
  m.def("_fallback_stats", [] {
    py::dict d;
    for (const auto& [name, count] : fallback_stats()) {
      d[py::str(name)] = count;
    }
    return d;
  });
  m.def("_fallback_records", [] {
    py::list l;
    for (const auto& r : fallback_records()) {
      l.append(py::make_tuple(r.op, r.calls, r.bytes_copied));
    }
    return l;
  });
  m.def("_set_prefer_host_flash_attention", &native::set_prefer_host_flash_attention);
  m.def("_reset_fallback_stats", &reset_fallback_stats);
  m.def("_set_fallback_mode", [](const std::string& mode) { set_fallback_mode(parse_mode(mode)); });
  m.def("_get_fallback_mode", [] {
    switch (fallback_mode()) {
      case FallbackMode::kWarn: return std::string("warn");
      case FallbackMode::kRaise: return std::string("raise");
      default: return std::string("allow");
    }
  });
}

} // namespace kernel_pytorch
