// The distributed layer's public interface (the my_asic c10d backend, myccl).
#pragma once

#include <pybind11/pybind11.h>

namespace kernel_pytorch::distributed {

// Adds kernel_pytorch._C._distributed (myccl) to the extension module.
void init_distributed_bindings(pybind11::module_& parent);

} // namespace kernel_pytorch::distributed
