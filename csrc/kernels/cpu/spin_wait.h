// Waiting on another thread of ours: spin briefly before blocking.
//
// A thread blocked on a condition variable is woken through the kernel. On a
// virtual machine whose idle CPU is halted that wake-up costs 20-60 us (an
// inter-processor interrupt and the vCPU's exit from halt): a small kernel
// enqueued on a simulated stream and waited for paid it twice, once to wake
// the stream's worker and once to wake the host. Work that completes within
// the spin budget is seen without a sleep on either side; longer waits still
// block, so an idle thread costs no CPU after kSpinBudget.
#pragma once

#include <chrono>
#include <thread>

namespace kp {

constexpr std::chrono::microseconds kSpinBudget{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` for up to kSpinBudget; returns whether it became true. Yields
// the CPU every few polls: on a machine with more runnable threads than
// cores, the thread being waited for may need this one's core to finish.
template <class Done>
bool spin_until(Done done) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (unsigned i = 1;; ++i) {
    cpu_relax();
    if (done()) return true;
    if (i % 16 == 0) {
      std::this_thread::yield();
      if (std::chrono::steady_clock::now() >= deadline) return done();
    }
  }
}

}  // namespace kp
