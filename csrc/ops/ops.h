// Python bindings of the kernel library's controls (kernel_pytorch.ops):
// the CPU ISA level and which kernels the my_asic runtime provides.
#pragma once

#include <torch/extension.h>

namespace kernel_pytorch::ops {
void add_python_bindings(py::module_& m);
}  // namespace kernel_pytorch::ops
