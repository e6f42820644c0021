// The ATen glue's public interface, for the layers above it (ops, the Python
// module): the CPU fallback that every ATen op without a native my_asic
// kernel runs (cpu_fallback.cpp), and what ops need of the native kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include "device_check.h"

// As pybind11 declares it (hidden visibility), without its headers.
namespace pybind11 __attribute__((visibility("hidden"))) { class module_; }

namespace kernel_pytorch {

// The boxed fallback itself: runs `op`'s CPU kernel for my_asic arguments
// (counted in fallback_stats). Native kernels call it for what they lack.
void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Counts one fallback call of `op` and applies MY_ASIC_FALLBACK: warns once
// per op in warn mode, throws NotImplementedError in raise mode. Every path
// that runs an op's CPU kernel for my_asic (dense or sparse) calls it.
void note_fallback_call(const c10::OperatorHandle& op);

// CPU kernels take CPU generators and CPU device= arguments: rewrites the
// arguments of `schema` at stack[begin...] for a call on my_asic `device`
// (its generator becomes that device's CPU engine).
void rewrite_generators_and_devices(
    const c10::FunctionSchema& schema, torch::jit::Stack* stack, size_t begin, c10::DeviceIndex device);

// Replaces each tensor in stack[begin, begin + n) (a tensor argument or
// return, or an element of a tensor list or optional tensor list) by fn(it).
void map_tensors(
    torch::jit::Stack* stack, size_t begin, size_t n, const std::function<at::Tensor(const at::Tensor&)>& fn);

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
// Per op: fallback calls and the bytes they copied between host and device
// (0 where the runtime's memory is host addressable and nothing is copied).
struct FallbackRecord {
  std::string op;
  int64_t calls;
  int64_t bytes_copied;
};
std::vector<FallbackRecord> fallback_records();
void reset_fallback_stats();

// Sends ops that would otherwise reach my_asic through a generic
// "default backend" kernel (structured ops: add, mul, ... run their meta
// function on the device tensors and then call the out= variant) straight to
// the CPU fallback, so their CPU kernel runs once, in place. Idempotent;
// returns the number of ops routed.
int64_t route_structured_ops_to_fallback();

// The routing itself, for any my_asic dispatch key (dense, sparse): every op
// with a kernel for one of `composite_keys` (which would otherwise serve
// `device_key`), a kernel for `cpu_key` and none for `device_key` gets
// `kernel()` for `device_key`. Returns the number of ops routed.
int64_t route_composite_ops(
    c10::DispatchKey device_key, c10::DispatchKey cpu_key, std::initializer_list<c10::DispatchKey> composite_keys,
    const std::function<torch::CppFunction()>& kernel);

// Whether ATen's CPU flash attention (forward and backward) serves my_asic
// tensors (native/attention.cpp): host-addressable memory and both kernels found.
namespace native {
bool host_flash_attention();
// While set on the calling thread (Inductor tracing a graph on host-addressable
// memory: compile_registration.py), attention with more than one query also
// takes ATen's CPU flash attention without a gradient: it runs on the calling
// thread's intra-op (OpenMP) threads like the graph's C++ kernels, where the
// runtime's prefill kernel would hand each call to the stream's worker and the
// kernel library's own pool and back. False when host_flash_attention() is.
bool prefer_host_flash_attention();
// Sets it for the calling thread; returns the previous setting.
bool set_prefer_host_flash_attention(bool prefer);
} // namespace native

// The glue's Python calls (python_bindings.cpp), added by csrc/python.
void init_aten_bindings(pybind11::module_& m);

} // namespace kernel_pytorch
