// ATen's fused CPU attention (flash attention, forward and backward) on
// my_asic tensors (host_kernels.h).
//
// The runtime's attention kernels have no backward and keep no logsumexp, so
// training through them recomputes the probabilities with a dozen ATen ops
// (ops/reference.cpp) after a round trip through the runtime's stream. When
// memory is host addressable, ATen's CPU flash attention pair computes on
// device memory directly; _fused_sdp_choice (ops/my_asic_aten.cpp) picks it
// for calls that need a gradient, as CUDA's selector picks a backend that
// serves the whole call.
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_native.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_native.h>

#include <atomic>

#include "host_kernels.h"

namespace kernel_pytorch::native {
namespace {
std::atomic<bool> g_registered{false};
thread_local bool t_prefer_host = false;
} // namespace

bool host_flash_attention() {
  return g_registered.load(std::memory_order_acquire);
}

bool prefer_host_flash_attention() {
  return t_prefer_host && host_flash_attention();
}

bool set_prefer_host_flash_attention(bool prefer) {
  const bool previous = t_prefer_host;
  t_prefer_host = prefer;
  return previous;
}

void register_attention(Registrar& r) {
  using namespace at::native;
  // Both kernels or neither: the forward's logsumexp is only for this backward.
  if (!cpu_flash_attention_stubs()) {
    return;
  }
  r.impl(
      "_scaled_dot_product_flash_attention_for_cpu",
      TORCH_FN((HostKernel<&_scaled_dot_product_flash_attention_cpu>::call)));
  r.impl(
      "_scaled_dot_product_flash_attention_for_cpu_backward",
      TORCH_FN((HostKernel<&_scaled_dot_product_flash_attention_cpu_backward>::call)));
  g_registered.store(true, std::memory_order_release);
}

} // namespace kernel_pytorch::native
