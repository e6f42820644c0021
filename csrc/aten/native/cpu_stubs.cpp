// Points the PrivateUse1 entry of ATen's DispatchStubs at ATen's CPU kernels.
//
// A structured op's impl() calls its stub with the device type of its
// tensors; for my_asic tensors over host-addressable memory the right kernel
// is the CPU one, at the ISA level ATen itself chose for this CPU.
//
// A stub keeps its CPU kernels in public static members (DEFAULT, and AVX2 /
// AVX512 on x86-64) that libtorch_cpu defines only for the kernels it has.
// They are looked up by symbol at run time instead of being linked: a torch
// build without some CPU kernel then leaves that one stub unset (its op
// reports a missing kernel) instead of failing to load the extension.
#include <ATen/Version.h>
#include <ATen/native/DispatchStub.h>

#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Copy.h>
#include <ATen/native/Fill.h>
#include <ATen/native/IndexKernel.h>
#include <ATen/native/Lerp.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/Pool.h>
#include <ATen/native/Pow.h>
#include <ATen/native/RangeFactories.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/native/cpu/CatKernel.h>
#include <ATen/native/cpu/SoftmaxKernel.h>
#include <ATen/native/transformers/attention.h>

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <typeinfo>

#include "host_kernels.h"

namespace kernel_pytorch::native {
namespace {

int g_stubs_set = 0;

// libtorch_cpu, which defines ATen's stubs and their CPU kernels.
void* aten_cpu_library() {
  static void* library = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::get_cpu_capability), &info) == 0 || info.dli_fname == nullptr) {
      return static_cast<void*>(nullptr);
    }
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return library;
}

// Reads the static member `member` of a stub. A stub object's type derives
// from DispatchStub<FnPtr, itself>, which holds the members; their symbol is
// that base's mangled name (what typeid gives, "N...E") with the member's
// name appended inside the nesting: _ZN...<len><member>E.
template <class Stub>
typename Stub::FnPtr static_kernel(void* library, const char* member) {
  using Base = at::native::DispatchStub<typename Stub::FnPtr, Stub>;
  const std::string type = typeid(Base).name();
  if (library == nullptr || type.size() < 2 || type.front() != 'N' || type.back() != 'E') {
    return nullptr;
  }
  const std::string symbol =
      "_Z" + type.substr(0, type.size() - 1) + std::to_string(std::strlen(member)) + member + "E";
  void* slot = dlsym(library, symbol.c_str());
  return slot != nullptr ? *static_cast<typename Stub::FnPtr*>(slot) : nullptr;
}

template <class Stub>
bool use_cpu_kernel(Stub& stub) {
  using Fn = typename Stub::FnPtr;
  void* library = aten_cpu_library();
  Fn fn = nullptr;
#if defined(__x86_64__) || defined(_M_X64)
  // ATen's level ("AVX512", "AVX2" or "DEFAULT", after ATEN_CPU_CAPABILITY).
  // Some kernels have no AVX-512 build (REGISTER_NO_AVX512_DISPATCH): ATen
  // then runs AVX2, and so do we.
  static const std::string capability = at::get_cpu_capability();
  if (capability == "AVX512") {
    fn = static_kernel<Stub>(library, "AVX512");
  }
  if (fn == nullptr && (capability == "AVX512" || capability == "AVX2")) {
    fn = static_kernel<Stub>(library, "AVX2");
  }
#endif
  if (fn == nullptr) {
    fn = static_kernel<Stub>(library, "DEFAULT");
  }
  if (fn != nullptr) {
    stub.set_privateuse1_dispatch_ptr(fn);
    ++g_stubs_set;
  }
  return fn != nullptr;
}

bool g_flash_attention = false;

} // namespace

int cpu_stubs_in_use() {
  return g_stubs_set;
}

void use_cpu_kernels_for_stubs() {
  using namespace at::native;
  // Elementwise arithmetic and comparisons.
  use_cpu_kernel(add_stub);
  use_cpu_kernel(mul_stub);
  use_cpu_kernel(div_true_stub);
  use_cpu_kernel(div_floor_stub);
  use_cpu_kernel(div_trunc_stub);
  use_cpu_kernel(eq_stub);
  use_cpu_kernel(ne_stub);
  use_cpu_kernel(lt_stub);
  use_cpu_kernel(le_stub);
  use_cpu_kernel(gt_stub);
  use_cpu_kernel(ge_stub);
  use_cpu_kernel(maximum_stub);
  use_cpu_kernel(minimum_stub);
  use_cpu_kernel(logical_and_stub);
  use_cpu_kernel(logical_not_stub);
  use_cpu_kernel(bitwise_and_stub);
  use_cpu_kernel(bitwise_or_stub);
  use_cpu_kernel(bitwise_xor_stub);
  use_cpu_kernel(bitwise_not_stub);
  use_cpu_kernel(nan_to_num_stub);
  use_cpu_kernel(mse_stub);
  use_cpu_kernel(addcmul_stub);
  use_cpu_kernel(addcdiv_stub);
  use_cpu_kernel(lerp_kernel_scalar_weight);
  use_cpu_kernel(lerp_kernel_tensor_weight);
  use_cpu_kernel(pow_tensor_scalar_stub);
  use_cpu_kernel(pow_tensor_tensor_stub);
  use_cpu_kernel(where_kernel);
  use_cpu_kernel(masked_fill_stub);
  use_cpu_kernel(index_stub);
  use_cpu_kernel(clamp_min_scalar_stub);
  use_cpu_kernel(clamp_max_scalar_stub);
  use_cpu_kernel(clamp_scalar_stub);
  // Unary math and activations (and their backward formulas).
  use_cpu_kernel(abs_stub);
  use_cpu_kernel(exp_stub);
  use_cpu_kernel(log_stub);
  use_cpu_kernel(neg_stub);
  use_cpu_kernel(reciprocal_stub);
  use_cpu_kernel(rsqrt_stub);
  use_cpu_kernel(sqrt_stub);
  use_cpu_kernel(sin_stub);
  use_cpu_kernel(cos_stub);
  use_cpu_kernel(sigmoid_stub);
  use_cpu_kernel(tanh_stub);
  use_cpu_kernel(isneginf_stub);
  use_cpu_kernel(isposinf_stub);
  use_cpu_kernel(sigmoid_backward_stub);
  use_cpu_kernel(tanh_backward_stub);
  use_cpu_kernel(threshold_stub);
  use_cpu_kernel(GeluKernel);
  use_cpu_kernel(GeluBackwardKernel);
  use_cpu_kernel(silu_stub);
  use_cpu_kernel(silu_backward_stub);
  use_cpu_kernel(leaky_relu_stub);
  use_cpu_kernel(leaky_relu_backward_stub);
  use_cpu_kernel(hardtanh_backward_stub);
  // Reductions.
  use_cpu_kernel(sum_stub);
  use_cpu_kernel(mean_stub);
  use_cpu_kernel(and_stub);
  use_cpu_kernel(or_stub);
  use_cpu_kernel(max_values_stub);
  use_cpu_kernel(min_values_stub);
  use_cpu_kernel(argmax_stub);
  // Factories, fills and random numbers (the kernels take the CPU engine that
  // host_kernels substitute for my_asic generators).
  use_cpu_kernel(fill_stub);
  use_cpu_kernel(arange_stub);
  use_cpu_kernel(normal_stub);
  use_cpu_kernel(uniform_stub);
  use_cpu_kernel(random_from_to_stub);
  use_cpu_kernel(random_stub);
  use_cpu_kernel(random_full_64_bits_range_stub);
  use_cpu_kernel(bernoulli_scalar_stub);
  use_cpu_kernel(bernoulli_tensor_stub);
  use_cpu_kernel(exponential_stub);
  // Pooling and softmax (their CPU impls name kCPU today; set for the day they don't).
  use_cpu_kernel(cat_serial_stub);
  use_cpu_kernel(copy_stub); // cat's non-serial path copies slices with it
  use_cpu_kernel(max_pool2d_kernel);
  use_cpu_kernel(max_pool2d_backward_kernel);
  use_cpu_kernel(softmax_lastdim_kernel);
  use_cpu_kernel(log_softmax_lastdim_kernel);
  use_cpu_kernel(softmax_backward_lastdim_kernel);
  use_cpu_kernel(log_softmax_backward_lastdim_kernel);
  use_cpu_kernel(softmax_kernel);
  use_cpu_kernel(log_softmax_kernel);
  use_cpu_kernel(softmax_backward_kernel);
  use_cpu_kernel(log_softmax_backward_kernel);
  // Flash attention (attention.cpp).
  const bool forward = use_cpu_kernel(flash_attention_kernel);
  g_flash_attention = use_cpu_kernel(flash_attention_backward_kernel) && forward;
}

bool cpu_flash_attention_stubs() {
  return g_flash_attention;
}

} // namespace kernel_pytorch::native
