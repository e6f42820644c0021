// torch.profiler's my_asic device activities (profiler_kineto.cpp).
#pragma once

namespace kernel_pytorch::activity {

// Whether torch.profiler can ask for my_asic device activities: the torch
// this was built against had Kineto's headers and the PrivateUse1 profiler
// registry (torch 2.13 has it; earlier versions may not).
bool device_activity_profiler_built();

} // namespace kernel_pytorch::activity
