// The boxed fallback for PrivateUse1.
//
// With host-addressable device memory (the reference simulator) the CPU
// kernel runs directly on device memory: arguments become host aliases and
// CPU allocations made by the kernel come from device memory (host views, core/core.h),
// so nothing is copied. Otherwise at::native::cpu_fallback copies arguments
// to the host and results back through the runtime.
#include "aten/aten.h"

#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <initializer_list>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/core.h"
#include "autograd_device_threads.h"
#include "device_check.h"
#include "native/runtime_conv.h"

namespace kernel_pytorch {
namespace {

FallbackMode mode_from_env() {
  const char* v = std::getenv("MY_ASIC_FALLBACK");
  if (v == nullptr || *v == '\0' || std::string(v) == "allow") {
    return FallbackMode::kAllow;
  }
  const std::string s(v);
  if (s == "warn") {
    return FallbackMode::kWarn;
  }
  if (s == "raise") {
    return FallbackMode::kRaise;
  }
  TORCH_WARN("MY_ASIC_FALLBACK='", s, "' is not one of allow, warn, raise; using 'allow'.");
  return FallbackMode::kAllow;
}

std::atomic<FallbackMode>& mode_slot() {
  static std::atomic<FallbackMode> mode{mode_from_env()};
  return mode;
}

struct OpCounter {
  std::string name;
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> bytes{0}; // copied host <-> device (non host-addressable runtimes)
  std::atomic<bool> warned{false};
};

struct Stats {
  std::mutex mutex;
  // Node-based: counters never move, so threads may cache pointers to them.
  std::unordered_map<const void*, OpCounter> by_op;
};

Stats& stats() {
  static auto* s = new Stats();
  return *s;
}

OpCounter& counter_for(const c10::OperatorHandle& op) {
  // Per-thread cache: the global map's mutex is taken once per op and thread.
  thread_local std::unordered_map<const void*, OpCounter*> cache;
  const void* key = &op.schema();
  auto hit = cache.find(key);
  if (C10_LIKELY(hit != cache.end())) {
    return *hit->second;
  }
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mutex);
  OpCounter& counter = s.by_op[key];
  if (counter.name.empty()) {
    const auto& n = op.operator_name();
    counter.name = n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
  }
  cache.emplace(key, &counter);
  return counter;
}

bool is_device_tensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Bytes of the my_asic tensors in stack[begin, end) (tensor lists included).
int64_t device_tensor_bytes(const torch::jit::Stack* stack, size_t begin, size_t end) {
  int64_t bytes = 0;
  auto add = [&](const at::Tensor& t) {
    if (is_device_tensor(t) && t.layout() == c10::kStrided) {
      bytes += static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
    }
  };
  for (size_t i = begin; i < end; ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      add(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) add(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList().vec()) {
        if (t.has_value()) add(*t);
      }
    }
  }
  return bytes;
}

// The device rule of `op` (device_check.h), derived once per op and thread.
const DeviceRule& device_rule(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, DeviceRule> cache;
  const void* key = &op.schema();
  auto hit = cache.find(key);
  if (C10_LIKELY(hit != cache.end())) {
    return hit->second;
  }
  return cache.emplace(key, device_rule_for(op.schema())).first->second;
}

// Finds the one my_asic device this call runs on, after checking that the
// arguments may share it: ATen's rule for CUDA (device_check.h), so a CPU
// tensor beside a my_asic tensor raises instead of being copied silently.
c10::DeviceIndex call_device(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t begin) {
  const auto& schema = op.schema();
  check_call_devices(schema, device_rule(op), *stack, begin);
  c10::DeviceIndex device = -1;
  auto see = [&](const at::Tensor& t) {
    if (device == -1 && is_device_tensor(t)) {
      device = t.device().index();
    }
  };
  for (size_t i = 0; i < schema.arguments().size() && device == -1; ++i) {
    const c10::IValue& v = (*stack)[begin + i];
    if (v.isTensor()) {
      see(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        see(t);
      }
    } else if (v.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
        if (t.has_value()) {
          see(*t);
        }
      }
    }
  }
  if (device == -1) {
    // Factory ops: the device comes from a device= argument.
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const c10::IValue& v = (*stack)[begin + i];
      if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
        device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
      }
    }
  }
  return device == -1 ? current_device() : device;
}

bool is_generator_arg(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    return type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
  }
  return type->kind() == c10::TypeKind::GeneratorType;
}


// A sparse result (to_sparse, say) has no one storage to adopt: its
// component tensors are adopted and reassembled as a my_asic sparse tensor.
at::Tensor adopt_sparse(DeviceAdopter& adopter, const at::Tensor& r, c10::DeviceIndex device) {
  const auto options = r.options().device(c10::DeviceType::PrivateUse1, device);
  if (r.layout() == c10::kSparse) {
    return at::_sparse_coo_tensor_unsafe(
        adopter.adopt(r._indices()), adopter.adopt(r._values()), r.sizes(), options, r.is_coalesced());
  }
  TORCH_CHECK(
      at::sparse_csr::is_sparse_compressed(r), "my_asic: cannot return a ", r.layout(),
      " tensor from a CPU kernel; only strided, sparse COO and compressed sparse layouts are supported");
  const auto [compressed, plain] = at::sparse_csr::getCompressedPlainIndices(r);
  return at::_sparse_compressed_tensor_unsafe(
      adopter.adopt(compressed), adopter.adopt(plain), adopter.adopt(r.values()), r.sizes(), options);
}

// A quantized result (quantize_per_tensor, say) cannot become a my_asic
// tensor: it needs a quantizer and QuantizedPrivateUse1 kernels, which my_asic
// does not have (views_and_factories.cpp). Refuse it with the fix, rather
// than hand back a tensor of a quantized dtype that every later op rejects.
void check_result_not_quantized(const c10::OperatorHandle& op, const at::Tensor& r) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      !r.defined() || !r.is_quantized(), "my_asic cannot hold quantized tensors: ", op.schema().name(),
      " would return a ", r.scalar_type(), " tensor, and my_asic has no quantized kernels "
      "(QuantizedPrivateUse1). Quantize on the CPU (torch.quantize_per_tensor(x.cpu(), ...)) and keep the "
      "quantized tensor there, or move its integer representation (q.int_repr()) to my_asic.");
}

// cpu_fallback copies each device tensor with .cpu(), which makes an
// expanded (stride-0) operand dense. The CPU kernel then lays its output out
// after that dense copy, where the meta function, seeing the stride 0,
// follows the other operands: x.expand(2, 2) * y.t() came back (2, 1)-strided
// where fake tensors predict (1, 2). Read-only broadcast operands are copied
// compactly (the stride-0 dimensions as size 1) and expanded again on the
// host, which keeps their strides and copies fewer bytes. Returns the bytes
// copied.
int64_t copy_broadcast_inputs_to_host(const c10::FunctionSchema& schema, torch::jit::Stack* stack, size_t begin) {
  int64_t bytes = 0;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[begin + i];
    if (args[i].alias_info() != nullptr || !v.isTensor()) {
      continue;
    }
    const at::Tensor& t = v.toTensor();
    if (!is_device_tensor(t) || t.layout() != c10::kStrided || t.numel() <= 1) {
      continue;
    }
    const auto strides = t.strides();
    if (std::find(strides.begin(), strides.end(), 0) == strides.end()) {
      continue;
    }
    std::vector<int64_t> compact(t.sizes().begin(), t.sizes().end());
    for (size_t d = 0; d < compact.size(); ++d) {
      if (strides[d] == 0) {
        compact[d] = 1;
      }
    }
    at::Tensor host = t.as_strided(compact, strides, t.storage_offset()).cpu();
    bytes += static_cast<int64_t>(host.numel()) * static_cast<int64_t>(host.element_size());
    v = c10::IValue(host.expand(t.sizes()));
  }
  return bytes;
}

void run_in_place_on_device(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t begin = stack->size() - num_args;
  const c10::DeviceIndex device = call_device(op, stack, begin);
  install_routing_cpu_allocator();

  // CPU kernels run on the host now: earlier async copies must be done.
  wait_current_stream(device);
  rewrite_generators_and_devices(schema, stack, begin, device);

  // (host alias impl, device tensor) for each device tensor argument.
  std::vector<std::pair<at::Tensor, at::Tensor>> aliases;
  int64_t largest = 0; // operand size, for pace_intra_op_threads
  auto alias_of = [&](const at::Tensor& t) -> at::Tensor {
    if (t.defined()) {
      largest = std::max(largest, t.numel());
    }
    if (!is_device_tensor(t)) {
      return t;
    }
    at::Tensor a = host_alias(t);
    aliases.emplace_back(a, t);
    return a;
  };
  map_tensors(stack, begin, num_args, alias_of);
  pace_intra_op_threads(largest);

  DeviceAdopter adopter(device);
  {
    RouteCpuAllocationsToDevice route(device);
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }

  // Mutated arguments: their device tensors take the alias's final geometry.
  for (size_t i = 0; i < num_args; ++i) {
    const auto* alias_info = schema.arguments()[i].alias_info();
    if (alias_info == nullptr || !alias_info->isWrite()) {
      continue;
    }
    for (const auto& [a, t] : aliases) {
      adopter.write_back(a, t);
    }
    break;
  }

  const size_t num_returns = schema.returns().size();
  const size_t rbegin = stack->size() - num_returns;
  auto to_device = [&](const at::Tensor& r) -> at::Tensor {
    check_result_not_quantized(op, r);
    if (r.defined() && r.layout() != c10::kStrided) {
      return adopt_sparse(adopter, r, device);
    }
    for (const auto& [a, t] : aliases) {
      if (r.unsafeGetTensorImpl() == a.unsafeGetTensorImpl()) {
        return t; // in-place / out= ops return their argument
      }
    }
    return adopter.adopt(r);
  };
  map_tensors(stack, rbegin, num_returns, to_device);
}

void my_asic_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  note_fallback_call(op);
  if (host_addressable()) {
    run_in_place_on_device(op, stack);
    return;
  }
  const auto& schema = op.schema();
  const size_t begin = stack->size() - schema.arguments().size();
  const c10::DeviceIndex device = call_device(op, stack, begin);
  // The op targets my_asic through a tensor argument or a device= argument
  // (factories such as _efficientzerotensor).
  bool has_device_tensor = false;
  int64_t largest = 0; // operand size, for pace_intra_op_threads
  for (size_t i = begin; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    has_device_tensor = has_device_tensor || (v.isTensor() && is_device_tensor(v.toTensor())) ||
        (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1);
    if (v.isTensor()) {
      largest = std::max(largest, v.toTensor().numel());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        largest = std::max(largest, t.numel());
      }
    }
  }
  pace_intra_op_threads(largest);
  wait_current_stream(device);
  rewrite_generators_and_devices(schema, stack, begin, device);
  // cpu_fallback copies every device tensor argument to the host, and
  // mutated arguments and results back: what fallback_report() shows a user.
  int64_t copied = copy_broadcast_inputs_to_host(schema, stack, begin) +
      device_tensor_bytes(stack, begin, stack->size());
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false);
  copied += device_tensor_bytes(stack, stack->size() - schema.returns().size(), stack->size());
  counter_for(op).bytes.fetch_add(copied, std::memory_order_relaxed);
  if (!has_device_tensor) {
    return;
  }
  // cpu_fallback sends results to the device of the first tensor argument;
  // when that is a CPU scalar (where(cond, 0.0-tensor, x), say) they stay on
  // the CPU. An op with my_asic inputs returns my_asic tensors, as in the
  // host-addressable path.
  const size_t rbegin = stack->size() - schema.returns().size();
  for (size_t i = rbegin; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      check_result_not_quantized(op, v.toTensor());
    }
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu() &&
        v.toTensor().layout() == c10::kStrided) {
      v = c10::IValue(v.toTensor().to(c10::Device(c10::DeviceType::PrivateUse1, device)));
    }
  }
}

// Convolutions are my_asic kernels, not fallbacks, when device memory is
// host addressable: ATen's CPU convolution (oneDNN or its own) runs on the
// device memory in place. Other runtimes use their entries where they can
// (native/runtime_conv.cpp) and copy through the fallback otherwise.
void convolution_on_device(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (host_addressable()) {
    run_in_place_on_device(op, stack);
    return;
  }
  if (native::runtime_convolution(op, stack)) return;  // the runtime's im2col + gemm
  my_asic_fallback(op, stack);
}

} // namespace

void rewrite_generators_and_devices(
    const c10::FunctionSchema& schema, torch::jit::Stack* stack, size_t begin, c10::DeviceIndex device) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[begin + i];
    if (is_generator_arg(args[i])) {
      std::optional<at::Generator> gen;
      if (v.isGenerator()) {
        gen = v.toGenerator();
      }
      v = c10::IValue(engine_for(gen, device));
    } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      v = c10::IValue(c10::Device(c10::DeviceType::CPU));
    }
  }
}
void map_tensors(
    torch::jit::Stack* stack, size_t begin, size_t n, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  for (size_t i = begin; i < begin + n; ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = c10::IValue(fn(v.toTensor()));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      out.reserve(v.toTensorList().size());
      for (const at::Tensor& t : v.toTensorList()) {
        out.push_back(fn(t));
      }
      v = c10::IValue(std::move(out));
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> out;
      out.reserve(v.toOptionalTensorList().size());
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList()) {
        out.push_back(t.has_value() ? std::optional<at::Tensor>(fn(*t)) : std::nullopt);
      }
      v = c10::IValue(std::move(out));
    }
  }
}

void note_fallback_call(const c10::OperatorHandle& op) {
  const FallbackMode mode = mode_slot().load(std::memory_order_relaxed);
  OpCounter& counter = counter_for(op);
  counter.count.fetch_add(1, std::memory_order_relaxed);
  if (mode == FallbackMode::kRaise) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "my_asic has no native kernel for '", op.operator_name(),
        "' and MY_ASIC_FALLBACK=raise forbids running it on the CPU fallback. Unset "
        "MY_ASIC_FALLBACK (or call kernel_pytorch.asic.set_fallback_mode('allow')) to "
        "allow it, or implement the op for my_asic.");
  }
  if (mode == FallbackMode::kWarn && !counter.warned.exchange(true)) {
    TORCH_WARN(
        "my_asic: '", op.operator_name(), "' has no native kernel and runs on the CPU "
        "fallback (warned once per op; MY_ASIC_FALLBACK=allow silences this).");
  }
}

void run_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  my_asic_fallback(op, stack);
}

void run_on_host_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  TORCH_INTERNAL_ASSERT(host_addressable(), "my_asic: host aliases need host-addressable device memory");
  run_in_place_on_device(op, stack);
}

int64_t route_composite_ops(
    c10::DispatchKey device_key, c10::DispatchKey cpu_key, std::initializer_list<c10::DispatchKey> composite_keys,
    const std::function<torch::CppFunction()>& kernel) {
  // Kept alive for the process: the registrations live as long as it does.
  auto* lib = new torch::Library(torch::Library::IMPL, "aten", device_key, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  std::vector<c10::OperatorName> candidates;
  for (const c10::DispatchKey composite : composite_keys) {
    for (auto& name : dispatcher.getAllOpNamesForDispatchKey(composite)) {
      candidates.push_back(std::move(name));
    }
  }
  int64_t n = 0;
  for (const auto& name : candidates) {
    auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(cpu_key) || op->hasKernelForDispatchKey(device_key)) {
      continue; // no CPU kernel to run, or my_asic has its own
    }
    const std::string qualified = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    // Library::impl keeps the name pointer: give it storage that outlives it.
    static std::deque<std::string> names;
    names.push_back(qualified.substr(qualified.find("::") + 2));
    lib->impl(names.back().c_str(), kernel());
    ++n;
  }
  return n;
}

int64_t route_structured_ops_to_fallback() {
  static int64_t routed = route_composite_ops(
      c10::DispatchKey::PrivateUse1, c10::DispatchKey::CPU,
      {c10::DispatchKey::CompositeExplicitAutogradNonFunctional},
      [] { return torch::CppFunction::makeFromBoxedFunction<&my_asic_fallback>(); });
  return routed;
}

void set_fallback_mode(FallbackMode mode) {
  mode_slot().store(mode);
}

FallbackMode fallback_mode() {
  return mode_slot().load();
}

std::vector<FallbackRecord> fallback_records() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<FallbackRecord> out;
  for (const auto& [key, counter] : s.by_op) {
    const int64_t count = counter.count.load();
    if (count > 0) {
      out.push_back({counter.name, count, counter.bytes.load()});
    }
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> fallback_stats() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(s.by_op.size());
  for (const auto& [key, counter] : s.by_op) {
    const int64_t count = counter.count.load();
    if (count > 0) {
      out.emplace_back(counter.name, count);
    }
  }
  return out;
}

void reset_fallback_stats() {
  auto& s = stats();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& [key, counter] : s.by_op) {
    counter.count.store(0);
    counter.bytes.store(0);
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&my_asic_fallback>());
}

// CompositeExplicitAutograd kernels that do not work for PrivateUse1:
// - convolution and convolution_backward pick a backend by device type and,
//   for PrivateUse1, call convolution_overrideable, which no backend
//   implements on the CPU: ATen's CPU convolution runs instead, on device
//   memory where the runtime allows it;
// - conj_physical_ calls its DispatchStub directly, which has no my_asic
//   entry: sent whole to the fallback.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&convolution_on_device>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&convolution_on_device>());
  m.impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&my_asic_fallback>());
}

} // namespace kernel_pytorch
