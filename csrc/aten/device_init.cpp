#include "device_init.h"

#include <atomic>
#include <mutex>

#include "aten/aten.h"
#include "core/core.h"
#include "native/host_kernels.h"
#include "sparse.h"

namespace kernel_pytorch {
namespace {
std::atomic<bool> g_initialized{false};
std::mutex g_mutex;
} // namespace

void initialize_device() {
  if (g_initialized.load(std::memory_order_acquire)) {
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_initialized.load(std::memory_order_relaxed)) {
    return;
  }
  rt();
  install_routing_cpu_allocator();
  // Native kernels first: the fallback routing skips ops that have one.
  native::register_host_kernels();
  route_structured_ops_to_fallback();
  route_structured_sparse_ops_to_fallback();
  g_initialized.store(true, std::memory_order_release);
}

bool device_initialized() {
  return g_initialized.load(std::memory_order_acquire);
}

} // namespace kernel_pytorch
