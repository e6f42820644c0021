// The ops layer's public interface: the Python bindings of the kernel
// library's controls (kernel_pytorch.ops): the CPU ISA level and which kernels
// the my_asic runtime provides.
#pragma once

#include <pybind11/pybind11.h>

namespace kernel_pytorch::ops {
void init_ops_bindings(pybind11::module_& m);
}  // namespace kernel_pytorch::ops
