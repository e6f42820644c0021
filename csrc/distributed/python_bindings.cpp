// Python side of myccl: kernel_pytorch._C._distributed. Thin wrappers only;
// kernel_pytorch/distributed/myccl.py registers the backend with
// torch.distributed.
#include "distributed.h"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "gloo_transport.h"
#include "myccl_backend.h"

namespace kernel_pytorch::distributed {

void init_distributed_bindings(pybind11::module_& parent) {
  namespace py = pybind11;
  auto m = parent.def_submodule("_distributed", "myccl, the torch.distributed backend of my_asic");
  py::class_<MycclBackend, c10d::Backend, c10::intrusive_ptr<MycclBackend>>(m, "MycclBackend")
      .def_property_readonly("transport", &MycclBackend::transport_name)
      .def_property_readonly("timeout", &MycclBackend::timeout);
  m.def(
      "_create_myccl_over_gloo",
      [](const c10::intrusive_ptr<c10d::Backend>& gloo, int rank, int size, std::chrono::milliseconds timeout) {
        return c10::make_intrusive<MycclBackend>(rank, size, make_gloo_transport(gloo), timeout);
      },
      py::arg("gloo"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "_wait_for_background_completions",
      [](double timeout_s) {
        return wait_for_background_completions(
            std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
      },
      py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>(),
      "Waits (at most timeout_s seconds) until no myccl operation is completing on a transport or "
      "completion thread; True when none is. The exit hook calls it before interpreter finalisation.");
}

} // namespace kernel_pytorch::distributed
