// Every ATen op without a native my_asic kernel runs its CPU kernel.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace kernel_pytorch {

// The boxed fallback itself: runs `op`'s CPU kernel for my_asic arguments
// (counted in fallback_stats). Native kernels call it for what they lack.
void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs `op`'s CPU kernel on host aliases of its my_asic arguments, as a
// my_asic kernel (not counted): for CPU implementations that insist on CPU
// tensors (convolution, batch norm). Needs host-addressable device memory.
void run_on_host_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack);

enum class FallbackMode { kAllow, kWarn, kRaise };

// Default comes from MY_ASIC_FALLBACK=allow|warn|raise (read once).
void set_fallback_mode(FallbackMode mode);
FallbackMode fallback_mode();
// (op name with overload, number of fallback calls), since start or reset.
std::vector<std::pair<std::string, int64_t>> fallback_stats();
void reset_fallback_stats();

// Sends ops that would otherwise reach my_asic through a generic
// "default backend" kernel (structured ops: add, mul, ... run their meta
// function on the device tensors and then call the out= variant) straight to
// the CPU fallback, so their CPU kernel runs once, in place. Idempotent;
// returns the number of ops routed.
int64_t route_structured_ops_to_fallback();

} // namespace kernel_pytorch
