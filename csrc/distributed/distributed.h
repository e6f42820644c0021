#pragma once

#include <pybind11/pybind11.h>

namespace kernel_pytorch::distributed {

// Adds kernel_pytorch._C._distributed (myccl) to the extension module.
void register_bindings(pybind11::module& parent);

} // namespace kernel_pytorch::distributed
