// my_asic's native kernels for host-addressable runtimes.
//
// When the runtime's device memory is host addressable (the reference
// simulator), ATen's own CPU kernels can compute on my_asic tensors where
// they lie: no host alias, no copy, no boxing. This is how the hot ops of an
// ordinary training step (factories and fills, elementwise math, reductions,
// the matmul family, softmax, losses, norms, pooling, RNG) run natively:
//
// - Structured ops (meta + impl) are driven exactly as ATen's generated
//   RegisterCPU.cpp drives them, with outputs allocated on my_asic
//   (structured.h). Their impl calls DispatchStubs with the device type of
//   the tensors, so each stub's PrivateUse1 entry points at ATen's CPU kernel
//   for the best ISA this CPU has (cpu_stubs.cpp).
// - Unstructured ops register ATen's CPU implementation itself.
// - Every kernel first waits for the work already queued on the current
//   my_asic stream, as a device kernel would run in stream order.
//
// Runtimes whose memory is not host addressable get none of this: their ops
// keep the counted CPU fallback (cpu_fallback.cpp), or use the runtime's own
// kernels where it has them (csrc/ops/my_asic.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/IListRef.h>
#include <ATen/core/boxing/KernelFunction.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <c10/util/ApproximateClock.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "aten/aten.h"
#include "core/core.h"
#include "../device_check.h"
#include "../autograd_device_threads.h"

namespace kernel_pytorch::native {

// Registers the native kernels when the runtime's memory is host addressable;
// called once at device initialisation, before the structured-op routing of
// the fallback. Returns how many ops were registered (0 otherwise).
int64_t register_host_kernels();

// Points the PrivateUse1 entry of the DispatchStubs that the registered ops
// reach at ATen's CPU kernels (cpu_stubs.cpp).
void use_cpu_kernels_for_stubs();
// How many stubs use_cpu_kernels_for_stubs() could point at a CPU kernel.
int cpu_stubs_in_use();
// Whether it found both of ATen's CPU flash attention kernels (attention.cpp).
bool cpu_flash_attention_stubs();

// Names of the ops registered by register_host_kernels(), for backend_info
// and tests.
const std::vector<std::string>& host_kernel_names();

namespace detail {

// A tensor the kernel writes (an out= argument, an in-place self): never a
// CPU scalar, as TensorIterator takes CPU scalars as inputs only.
struct Written {
  const at::Tensor& tensor;
};

// Passed first to HostKernelScope by the kernels of ops whose CUDA wrappers
// check every tensor (ops not marked `device_check: NoCheck`): for them a
// 0-dim CPU tensor is no scalar either (device_check.h).
template <bool kExactSame>
struct DeviceRuleTag {};

// The one device a call runs on. CPU 0-dim input tensors are scalars that
// TensorIterator ops take on any device; anything else on another device is
// the caller's mistake, reported as PyTorch reports it for CUDA.
struct CallDevice {
  std::optional<c10::Device> device;
  int64_t largest_numel = 0; // of any tensor argument
  bool cpu_scalars = true;
  void see(const at::Tensor& t, bool written = false) {
    if (!t.defined()) {
      return;
    }
    largest_numel = std::max(largest_numel, t.numel());
    if (cpu_scalars && !written && t.dim() == 0 && t.device().is_cpu()) {
      return;
    }
    if (!device) {
      device = t.device();
      return;
    }
    if (C10_UNLIKELY(*device != t.device())) {
      raise_device_mismatch(*device, t.device(), "", "", cpu_scalars);
    }
  }
  void see(const Written& w) {
    see(w.tensor, /*written=*/true);
  }
  void see(DeviceRuleTag<true>) {
    cpu_scalars = false;
  }
  void see(DeviceRuleTag<false>) {}
  void see(const std::optional<at::Tensor>& t) {
    if (t.has_value()) {
      see(*t);
    }
  }
  void see(const at::ITensorListRef& list) {
    for (const at::Tensor& t : list) {
      see(t);
    }
  }
  void see(at::TensorList list) {
    for (const at::Tensor& t : list) {
      see(t);
    }
  }
  template <class T>
  void see(const T&) {}
};

// What HostKernelScope sees of a kernel argument of declared type A: tensors
// passed by non-const reference are written.
template <class A, class V>
decltype(auto) seen_as(const V& v) {
  if constexpr (std::is_same_v<A, at::Tensor&>) {
    return Written{v};
  } else {
    return (v);
  }
}

} // namespace detail

// Scope of one native kernel: waits for the current stream of the my_asic
// device the arguments live on (the CPU kernel runs on the host thread, in
// stream order), and while alive makes device work started from inside the
// kernel synchronous (the host kernel scope of core/core.h).
//
// While the profiler records device activity, the outermost scope on a thread
// is recorded as one kernel on that stream (activity::HostWork, core/core.h). A caller that
// gives up on the kernel before running it (and takes the fallback) calls
// dismiss().
class HostKernelScope {
 public:
  template <class... Args>
  explicit HostKernelScope(const Args&... args) {
    detail::CallDevice call;
    (call.see(args), ...);
    const c10::DeviceIndex device =
        call.device && call.device->type() == c10::DeviceType::PrivateUse1 ? call.device->index() : current_device();
    pace_intra_op_threads(call.largest_numel);
    const int64_t entered = activity::recording() ? c10::getTime() : 0;
    wait_current_stream(device);
    if (activity::recording() && host_kernel_depth() == 1) {
      work_.begin(activity::Kind::HostKernel, 0, current_stream(device), entered);
    }
  }
  void dismiss() {
    work_.dismiss();
  }

 private:
  HostKernelDepth depth_;
  activity::HostWork work_; // destroyed before depth_: ends the kernel's timing
};

// The operator a registered kernel serves, for its fallback path.
void remember_operator(const void* kernel, const char* name);
const c10::OperatorHandle& operator_of(const void* kernel);
// The key a kernel function is remembered and found by (remember_operator,
// operator_of, run_on_fallback): its address.
template <typename Fn>
const void* kernel_key(Fn fn) {
  return reinterpret_cast<const void*>(fn);
}

// Registers kernels on the PrivateUse1 library, skipping ops that my_asic
// already implements elsewhere (its own kernels win over ATen's CPU ones).
class Registrar {
 public:
  explicit Registrar(torch::Library& lib) : lib_(lib) {}
  template <class Fn>
  void impl(const char* name, Fn&& fn) {
    if (has_my_asic_kernel(name)) {
      return;
    }
    using F = std::decay_t<Fn>;
    if constexpr (c10::is_compile_time_function_pointer<F>::value) {
      remember_operator(kernel_key(F::func_ptr()), name);
    }
    lib_.impl(name, std::forward<Fn>(fn));
    registered_.emplace_back(name);
  }
  const std::vector<std::string>& registered() const {
    return registered_;
  }

 private:
  static bool has_my_asic_kernel(const char* name);
  torch::Library& lib_;
  std::vector<std::string> registered_;
};

// Runs the call through a boxed kernel instead of `kernel`: the counted CPU
// fallback for the argument combinations ATen's CPU loops only take after a
// CPU-only step (mixed dtypes, which TensorIterator casts for CPU tensors
// alone), or host aliases where a CPU kernel must see CPU tensors.
template <c10::BoxedKernel::BoxedKernelFunction* boxed, class R, class... A>
R run_boxed(const void* kernel, A... args) {
  static const c10::BoxedKernel k = c10::BoxedKernel::makeFromFunction<boxed>();
  return c10::impl::BoxedKernelWrapper<R(A...)>::call(
      k, operator_of(kernel), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), std::forward<A>(args)...);
}

template <class R, class... A>
R run_on_fallback(const void* kernel, A... args) {
  return run_boxed<&run_cpu_fallback, R, A...>(kernel, std::forward<A>(args)...);
}

// One registration function per op family (one file each).
void register_pointwise(Registrar& r);
void register_reductions(Registrar& r);
void register_matmul(Registrar& r);
// mm/bmm/addmm/baddbmm through the runtime's GEMM (runtime_gemm.cpp): for
// runtimes whose memory the host cannot address.
void register_runtime_gemm(Registrar& r);
// Elementwise ops and sum/mean/amax/amin through the runtime's pointwise and
// reduce entries (runtime_pointwise.cpp, runtime_reduce.cpp), likewise.
void register_runtime_pointwise(Registrar& r);
void register_runtime_reduce(Registrar& r);
// The softmax family, nll_loss and layer_norm (runtime_losses.cpp), and
// argmax/argmin, var/std and the reductions' out= forms
// (runtime_statistics.cpp) through their entries, likewise.
void register_runtime_losses(Registrar& r);
void register_runtime_statistics(Registrar& r);
// index_select, index.Tensor, index_put_, embedding's backward, masked_fill_
// and cat through the gather/scatter/pointwise entries (runtime_indexing.cpp);
// logical_not, bitwise_not, nan_to_num, tril/triu, arange through pointwise
// (runtime_tensor_ops.cpp).
void register_runtime_indexing(Registrar& r);
void register_runtime_tensor_ops(Registrar& r);
// normal_, uniform_, bernoulli_, random_, exponential_ and native_dropout
// through the runtime's random entry (runtime_random.cpp).
void register_runtime_random(Registrar& r);
// sort (argsort, msort), topk, kthvalue, median and nanmedian through the
// runtime's sort entry (runtime_sort.cpp).
void register_runtime_sort(Registrar& r);
// avg_pool2d and upsample_nearest2d with their backward, composed from the
// im2col, reduce, gather and scatter entries (runtime_resample.cpp).
void register_runtime_resample(Registrar& r);
// cumsum, cumprod, _logcumsumexp, flip, nonzero, masked_select and
// masked_scatter_ through the
// runtime's scan entry (with pointwise and scatter; runtime_scan.cpp).
void register_runtime_scan(Registrar& r);
// native_group_norm_backward composed from pointwise ops and reductions
// (runtime_group_norm.cpp).
void register_runtime_group_norm(Registrar& r);
void register_nn(Registrar& r);
void register_factories_and_random(Registrar& r);
void register_indexing(Registrar& r);
void register_attention(Registrar& r);

// Wraps an ATen CPU implementation `fn` as a my_asic kernel; kExactSame for
// ops whose CUDA wrappers check every tensor (no `device_check: NoCheck`).
template <auto fn, class Sig = std::remove_pointer_t<decltype(fn)>, bool kExactSame = false>
struct HostKernel;

template <auto fn, bool kExactSame, class R, class... A>
struct HostKernel<fn, R(A...), kExactSame> {
  static R call(A... args) {
    const HostKernelScope scope(detail::DeviceRuleTag<kExactSame>{}, detail::seen_as<A>(args)...);
    return fn(std::forward<A>(args)...);
  }
};

template <auto fn>
using ExactSameHostKernel = HostKernel<fn, std::remove_pointer_t<decltype(fn)>, true>;

// Whether the structured op `Impl` serves has a CUDA wrapper that checks
// every tensor (no `device_check: NoCheck`); specialised where it does.
template <class Impl>
inline constexpr bool exact_same_device = false;

} // namespace kernel_pytorch::native
