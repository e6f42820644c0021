// Intra-op threads of host kernels on the autograd engine's device threads.
//
// PyTorch's CPU wheel parallelises with OpenMP (libgomp) and MKL, which keep
// one thread pool per thread that starts a parallel region. my_asic's host
// kernels (ATen CPU kernels on device memory, and the CPU fallback) run on
// whichever thread calls them, and a backward on my_asic runs on the autograd
// engine's device thread (pt_autograd_N), not on the caller's. The first
// parallel region there gives the process a second pool, so it holds more
// OpenMP threads than CPUs; libgomp then stops spinning idle pool threads
// and puts them to sleep after every region, for the rest of the process.
// From then on each parallel region pays a futex wake-up per thread, on the
// CPU as on my_asic: a small Transformer's CPU training step went from
// 3.2 ms to 10 ms on 2 cores after one my_asic backward.
//
// So a host kernel on one of the engine's device threads runs with one
// intra-op thread (OpenMP and MKL, for that thread only) until one of its
// operands has 65,536 elements (kParallelNumel), enough for threads to pay;
// from then on that thread uses torch's thread count (and the process pays for the
// second pool, as it did before). Other threads are left alone: a user's
// own thread may run CPU work too, which this must not slow down.
#pragma once

#include <cstdint>

namespace kernel_pytorch {

namespace detail {
enum class AutogradThreadState : uint8_t { Unknown, Parallel, Serial };
inline AutogradThreadState& autograd_thread_state() {
  static thread_local AutogradThreadState state = AutogradThreadState::Unknown;
  return state;
}
void pace_autograd_thread(int64_t largest_numel);
} // namespace detail

// Called before a host kernel runs, with the element count of its largest
// operand. Costs one thread-local load once the thread runs in parallel.
inline void pace_intra_op_threads(int64_t largest_numel) {
  if (detail::autograd_thread_state() != detail::AutogradThreadState::Parallel) {
    detail::pace_autograd_thread(largest_numel);
  }
}

// Whether host kernels on the calling thread run with one intra-op thread.
bool intra_op_threads_limited();

} // namespace kernel_pytorch
