// Python bindings of the CUDA backend (compiled only into CUDA builds).
#pragma once

#include <torch/extension.h>

namespace kernel_pytorch::ops::cuda {
void add_python_bindings(py::module_& m);
}  // namespace kernel_pytorch::ops::cuda
