// How an op runs on my_asic tensors: the runtime's own kernel, else the CPU
// fallback, which fallback_stats() counts (what the runtime still misses).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "aten/aten.h"
#include "core/core.h"

namespace kernel_pytorch::ops {

// Enqueues `kernel` on the current stream of `like`'s device. False, having
// enqueued nothing, when the runtime has no such kernel or declines the call
// (KPDR_ERROR_NOT_SUPPORTED, e.g. for its dtype): the caller falls back.
template <typename Args>
bool launch(kpdrError_t (*kernel)(const Args*, kpdrStream_t), const Args& args, const at::Tensor& like) {
  return launch_kernel(kernel, args, current_stream(like.device().index()));
}

// Runs the operator `name` ("namespace::op") on `stack` through the CPU fallback.
inline torch::jit::Stack run_fallback(const char* name, torch::jit::Stack stack) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  run_cpu_fallback(op, &stack);
  return stack;
}

}  // namespace kernel_pytorch::ops
