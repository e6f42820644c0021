// ATen's device-compatibility rule for kernels that bypass ATen's CUDA-style
// codegen checks (device_check.h).
#include "device_check.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>

namespace kernel_pytorch {
namespace {

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// NoCheck ops whose CUDA kernels move data between devices or only read
// metadata: no check (checked on CUDA: copy_ both ways, to(other), is_set_to,
// is_same_size).
bool moves_between_devices(std::string_view base) {
  return is_one_of(
      base, {"copy_", "copy", "_copy_from", "_copy_from_and_resize", "_to_copy", "to", "is_set_to", "is_same_size",
             "_has_same_storage_numel", "_has_compatible_shallow_copy_type", "_foreach_copy_", "_foreach_copy"});
}

// Arguments that CUDA kernels take from the CPU as well as from the op's
// device: the indices of the indexing ops (moved to the device by the
// kernel), bernoulli_'s probabilities.
bool may_stay_on_cpu(std::string_view base, std::string_view arg) {
  if (arg == "indices") {
    return is_one_of(
        base, {"index", "_index_put_impl_", "_index_put_impl", "index_put_", "index_put", "_unsafe_index",
               "_unsafe_index_put", "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate"});
  }
  return arg == "p" && is_one_of(base, {"bernoulli_", "bernoulli"});
}

// Inputs of NoCheck ops whose CUDA kernels refuse 0-dim CPU tensors although
// TensorIterator would take them (checked on CUDA: masked_fill_'s mask,
// index_fill_'s index, addcdiv's tensor1, addcmul/addcdiv's self, every
// tensor of binary_cross_entropy, set_'s source).
bool never_a_cpu_scalar(std::string_view base, std::string_view arg) {
  if (is_one_of(base, {"masked_fill", "masked_fill_"})) {
    return arg == "mask";
  }
  if (is_one_of(base, {"index_fill", "index_fill_"})) {
    return arg == "index";
  }
  if (is_one_of(base, {"addcdiv", "addcdiv_"})) {
    return arg == "self" || arg == "tensor1";
  }
  if (is_one_of(base, {"addcmul", "addcmul_"})) {
    return arg == "self";
  }
  return is_one_of(base, {"binary_cross_entropy", "set_"});
}

template <class Fn>
void for_each_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      fn(t);
    }
  } else if (v.isOptionalTensorList()) {
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      if (t.has_value()) {
        fn(*t);
      }
    }
  }
}

std::string op_name(const c10::FunctionSchema& schema) {
  return schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name();
}

// One group of tensors that must share a device: the whole call, or one
// position of a foreach op's lists.
class Group {
 public:
  Group(const c10::FunctionSchema& schema, const DeviceRule& rule) : schema_(schema), rule_(rule) {}

  void see(const at::Tensor& t, size_t arg) {
    if (!t.defined()) {
      return;
    }
    if (rule_.check != DeviceCheck::kExactSame && t.dim() == 0 && t.is_cpu() && !bit(rule_.no_cpu_scalar_args, arg)) {
      return; // a scalar, as TensorIterator takes it
    }
    if (!device_) {
      device_ = t.device();
      return;
    }
    if (C10_UNLIKELY(*device_ != t.device())) {
      raise_device_mismatch(
          *device_, t.device(), schema_.arguments()[arg].name(), op_name(schema_),
          rule_.check != DeviceCheck::kExactSame);
    }
  }

  // An argument that may be on the CPU or on the op's device.
  void see_cpu_or_same(const at::Tensor& t, size_t arg) {
    if (t.defined() && !t.is_cpu() && device_ && *device_ != t.device()) {
      raise_device_mismatch(*device_, t.device(), schema_.arguments()[arg].name(), op_name(schema_), true);
    }
  }

  static bool bit(uint64_t mask, size_t i) {
    return i < 64 && ((mask >> i) & 1u);
  }

 private:
  const c10::FunctionSchema& schema_;
  const DeviceRule& rule_;
  std::optional<c10::Device> device_;
};

} // namespace

DeviceRule device_rule_for(const c10::FunctionSchema& schema) {
  DeviceRule rule;
  if (schema.name().rfind("aten::", 0) != 0) {
    return rule;
  }
  const std::string_view base = std::string_view(schema.name()).substr(6);
  if (moves_between_devices(base)) {
    rule.check = DeviceCheck::kNone;
    return rule;
  }
  if (base.rfind("_foreach_", 0) == 0) {
    rule.check = DeviceCheck::kForeach;
  } else if (aten_op_checks_its_own_devices(op_name(schema).substr(6))) {
    rule.check = DeviceCheck::kCpuScalars;
  }
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size() && i < 64; ++i) {
    const auto& arg = args[i];
    const bool written = arg.is_out() || (arg.alias_info() != nullptr && arg.alias_info()->isWrite());
    const uint64_t b = uint64_t{1} << i;
    if (rule.check == DeviceCheck::kExactSame && arg.kwarg_only() && !arg.is_out()) {
      rule.skipped_args |= b; // CUDA's generated check covers positional and out= arguments only
      continue;
    }
    if (rule.check != DeviceCheck::kExactSame && may_stay_on_cpu(base, arg.name())) {
      rule.skipped_args |= b;
    }
    if (written || never_a_cpu_scalar(base, arg.name())) {
      rule.no_cpu_scalar_args |= b; // TensorIterator takes CPU scalars as inputs only
    }
  }
  return rule;
}

void check_call_devices(
    const c10::FunctionSchema& schema, const DeviceRule& rule, const torch::jit::Stack& stack, size_t begin) {
  const size_t n = schema.arguments().size();
  switch (rule.check) {
    case DeviceCheck::kNone:
      return;
    case DeviceCheck::kExactSame:
    case DeviceCheck::kCpuScalars: {
      Group group(schema, rule);
      for (size_t i = 0; i < n; ++i) {
        if (!Group::bit(rule.skipped_args, i)) {
          for_each_tensor(stack[begin + i], [&](const at::Tensor& t) { group.see(t, i); });
        }
      }
      if (rule.skipped_args != 0 && rule.check == DeviceCheck::kCpuScalars) {
        for (size_t i = 0; i < n; ++i) {
          if (Group::bit(rule.skipped_args, i)) {
            for_each_tensor(stack[begin + i], [&](const at::Tensor& t) { group.see_cpu_or_same(t, i); });
          }
        }
      }
      return;
    }
    case DeviceCheck::kForeach: {
      // The foreach kernels fall back to one op per list position when the
      // lists mix devices: the tensors of each position must agree.
      size_t positions = 0;
      for (size_t i = 0; i < n; ++i) {
        const c10::IValue& v = stack[begin + i];
        if (v.isTensorList()) {
          positions = std::max(positions, v.toTensorList().size());
        }
      }
      for (size_t j = 0; j < positions; ++j) {
        Group group(schema, rule);
        for (size_t i = 0; i < n; ++i) {
          const c10::IValue& v = stack[begin + i];
          if (v.isTensorList()) {
            const auto list = v.toTensorList();
            if (j < list.size()) {
              group.see(list.get(j), i);
            }
          } else if (v.isTensor()) {
            group.see(v.toTensor(), i);
          }
        }
      }
      return;
    }
  }
}

void check_same_device(
    std::string_view op, std::initializer_list<std::pair<std::string_view, const at::Tensor*>> tensors) {
  std::optional<c10::Device> device;
  for (const auto& [name, t] : tensors) {
    if (t == nullptr || !t->defined()) {
      continue;
    }
    if (!device) {
      device = t->device();
    } else if (C10_UNLIKELY(*device != t->device())) {
      raise_device_mismatch(*device, t->device(), name, op, /*cpu_scalars_allowed=*/false);
    }
  }
}

void raise_device_mismatch(
    c10::Device first, c10::Device other, std::string_view argument, std::string_view op, bool cpu_scalars_allowed) {
  const bool one_is_cpu = first.is_cpu() || other.is_cpu();
  const c10::Device device = first.is_cpu() ? other : first;
  std::string hint;
  if (one_is_cpu) {
    hint = "Move the CPU tensor to " + device.str() + " with .to('" + device.str() + "') first";
    hint += cpu_scalars_allowed ? " (only 0-dim CPU tensors may join " + device.str() + " tensors, as scalars)."
                                : ".";
  } else {
    hint = "Move them to one device with .to('" + c10::DeviceTypeName(device.type(), /*lower_case=*/true) +
        ":N') first.";
  }
  const std::string where = argument.empty()
      ? std::string()
      : " (when checking argument '" + std::string(argument) + "' of " + std::string(op) + ")";
  TORCH_CHECK(
      false, "Expected all tensors to be on the same device, but found at least two devices, ", first, " and ", other,
      "!", where, " ", hint);
}

} // namespace kernel_pytorch
