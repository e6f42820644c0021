// Why: the autograd engine starts one thread per my_asic device at the first
// backward. A backward's GraphTask carries a snapshot of the thread-local
// state, including Python objects (torch.autograd.graph stashes a
// contextvars.Context there), and whichever thread drops the last reference
// destroys it. When that is the device thread, after backward() has already
// returned, the destructor takes the GIL; if the interpreter is finalising by
// then, CPython ends the thread with pthread_exit, whose forced unwind meets a
// noexcept frame and calls std::terminate: "terminate called without an
// active exception", exit code 134, at random. (Upstream: c10 SafePyObject's
// decref checks only Py_IsInitialized(), torch/csrc/PyInterpreter.cpp; the
// general problem of C++ threads calling into Python at exit is
// pytorch/pytorch#38228.)
//
// The cure from outside the engine: before finalisation starts, give each
// device thread one more task and wait for it. A thread takes tasks one at a
// time and drops the previous task's GraphTask before taking the next, so
// once ours completes no earlier backward's state is left on it. Our task
// holds no Python objects, so dropping it later needs no GIL.
#include "autograd_exit.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "core/core.h"

namespace kernel_pytorch {

void drain_autograd_device_threads() {
  if (!runtime_initialized() || in_bad_fork()) {
    return;
  }
  const c10::DeviceIndex n = device_count_noexcept();
  for (c10::DeviceIndex d = 0; d < n; ++d) {
    // Only native my_asic ops (factory, view, copy), so this works under
    // MY_ASIC_FALLBACK=raise too. grad() of a view: its one node runs on
    // device thread d (the engine queues work by the input's device).
    const auto options = at::TensorOptions().device(c10::DeviceType::PrivateUse1, d);
    at::Tensor x = at::empty({1}, options).requires_grad_(true);
    at::Tensor y = x.view({1});
    at::Tensor g = at::empty({1}, options);
    torch::autograd::grad({y}, {x}, {g});
  }
}

} // namespace kernel_pytorch
