// The profiler layer's public interface: my_asic device time for
// torch.autograd.profiler (profiler.cpp) and device activities for
// torch.profiler (profiler_kineto.cpp, device_activity.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace kernel_pytorch {

// Adds _device_activity_profiler_built(): whether torch.profiler can ask for
// my_asic device activities (the torch this was built against had Kineto's
// headers and the PrivateUse1 profiler registry; torch 2.13 has them).
void init_profiler_bindings(pybind11::module_& m);

} // namespace kernel_pytorch
