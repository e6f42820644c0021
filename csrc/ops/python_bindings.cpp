#include "ops/python_bindings.h"

#include "aten/runtime.h"
#include "kernels/kernels.h"

namespace kernel_pytorch::ops {

void add_python_bindings(py::module_& m) {
  m.def("_kp_cpu_isa", [] { return std::string(kp::isa_name(kp::active_isa())); });
  m.def("_kp_best_cpu_isa", [] { return std::string(kp::isa_name(kp::best_supported_isa())); });
  m.def("_kp_set_cpu_isa", [](const std::string& name) {
    std::string error;
    TORCH_CHECK_VALUE(kp::set_active_isa(name, &error), "kernel_pytorch.ops.set_cpu_isa: ", error);
  });
  // Entries of the my_asic runtime's kernel table that are present.
  m.def("_runtime_kernel_names", [] {
    const kpdrKernelTable& t = runtime_kernels();
    std::vector<std::string> names;
    if (t.rms_norm) names.emplace_back("rms_norm");
    if (t.silu) names.emplace_back("silu");
    if (t.rope) names.emplace_back("rope");
    if (t.softmax) names.emplace_back("softmax");
    if (t.decode_attention) names.emplace_back("decode_attention");
    if (t.prefill_attention) names.emplace_back("prefill_attention");
    if (t.matmul_vec) names.emplace_back("matmul_vec");
    return names;
  });
}

}  // namespace kernel_pytorch::ops
