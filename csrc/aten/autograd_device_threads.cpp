#include "autograd_device_threads.h"

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>

#include <pthread.h>

#include <cstring>

// Resolved from torch's own libgomp and MKL (libtorch_cpu) when this build
// of torch has them; null otherwise, and then there is nothing to limit.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
extern "C" int MKL_Set_Num_Threads_Local(int) __attribute__((weak));

namespace kernel_pytorch {
namespace detail {
namespace {

// Operand size (elements) from which an autograd device thread's host kernels
// use torch's intra-op threads: twice ATen's grain size, the smallest
// elementwise op ATen would split in two.
constexpr int64_t kParallelNumel = 2 * at::internal::GRAIN_SIZE;

// The engine names its device threads (and the threads of its re-entrant
// backward pool) "pt_autograd_<device>" (torch/csrc/autograd/engine.cpp).
bool on_autograd_device_thread() {
  char name[16] = {0};
  constexpr char kPrefix[] = "pt_autograd_";
  return pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 &&
      std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) == 0;
}

void limit_to_one_thread() {
  at::internal::lazy_init_num_threads(); // ATen's per-thread init would undo ours later
  if (omp_set_num_threads != nullptr) {
    omp_set_num_threads(1);
  }
  if (MKL_Set_Num_Threads_Local != nullptr) {
    MKL_Set_Num_Threads_Local(1);
  }
}

void use_torch_threads() {
  if (MKL_Set_Num_Threads_Local != nullptr) {
    MKL_Set_Num_Threads_Local(0); // 0: MKL's process-wide setting again
  }
  at::init_num_threads(); // torch's current thread count for this thread
}

} // namespace

void pace_autograd_thread(int64_t largest_numel) {
  AutogradThreadState& state = autograd_thread_state();
  if (state == AutogradThreadState::Unknown) {
    if (!on_autograd_device_thread() || at::get_num_threads() <= 1) {
      state = AutogradThreadState::Parallel;
      return;
    }
    limit_to_one_thread();
    state = AutogradThreadState::Serial;
  }
  if (state == AutogradThreadState::Serial && largest_numel >= kParallelNumel) {
    use_torch_threads();
    state = AutogradThreadState::Parallel;
  }
}

} // namespace detail

bool intra_op_threads_limited() {
  return detail::autograd_thread_state() == detail::AutogradThreadState::Serial;
}

} // namespace kernel_pytorch
