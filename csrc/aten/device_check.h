// Which devices the tensors of one my_asic op may be on: ATen's rule for CUDA.
//
// ATen's generated CUDA wrappers check that every tensor argument is on one
// device (check_and_update_common_device) unless native_functions.yaml marks
// the op `device_check: NoCheck`; those kernels check themselves, mostly
// through TensorIterator, which takes 0-dim CPU tensors as scalars. A few
// take CPU tensors on purpose (the indices of index/index_put_, bernoulli_'s
// p, copies). Kernels that do not come from ATen's CUDA codegen (the CPU
// fallback, the native host kernels) apply the same rule through this file.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace kernel_pytorch {

enum class DeviceCheck : uint8_t {
  kExactSame,    // every tensor on one device (CUDA's generated check)
  kCpuScalars,   // as kExactSame, but 0-dim CPU inputs are scalars (TensorIterator)
  kForeach,      // kCpuScalars per list position (the foreach slow path)
  kNone,         // the op moves data between devices (copies) or reads metadata only
};

// The rule for one operator, derived once from its schema.
struct DeviceRule {
  DeviceCheck check = DeviceCheck::kExactSame;
  uint64_t skipped_args = 0;      // bit i: argument i may be on any device (CPU indices)
  uint64_t no_cpu_scalar_args = 0; // bit i: argument i is never a CPU scalar (outputs, masks)
};

// Whether native_functions.yaml marks `name` ("add.Tensor", "dot") as
// `device_check: NoCheck` (device_check_table.cpp, generated).
bool aten_op_checks_its_own_devices(std::string_view name);

// The rule for an aten op (other namespaces get kExactSame).
DeviceRule device_rule_for(const c10::FunctionSchema& schema);

// Checks the arguments at stack[begin...] of a call of `schema` against
// `rule`; raises RuntimeError worded as PyTorch words it for CUDA.
void check_call_devices(
    const c10::FunctionSchema& schema, const DeviceRule& rule, const torch::jit::Stack& stack, size_t begin);

// The strict rule (every defined tensor on one device) for hand-written
// kernels: `tensors` are (argument name, tensor or nullptr) of aten op `op`.
void check_same_device(
    std::string_view op, std::initializer_list<std::pair<std::string_view, const at::Tensor*>> tensors);

// The error for two devices in one call, with a hint for my_asic users.
[[noreturn]] void raise_device_mismatch(
    c10::Device first, c10::Device other, std::string_view argument, std::string_view op, bool cpu_scalars_allowed);

} // namespace kernel_pytorch
