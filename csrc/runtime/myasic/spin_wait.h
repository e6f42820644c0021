// Waiting on the simulator's own threads: spin briefly before blocking.
//
// A thread blocked on a condition variable is woken through the kernel. On a
// virtual machine whose idle CPU is halted that wake-up costs 20-60 us (an
// inter-processor interrupt and the vCPU's exit from halt): a small kernel
// enqueued on a stream and waited for paid it twice, once to wake the worker
// and once to wake the host. Work that completes within the spin budget is
// now seen without a sleep on either side; longer work still blocks, so an
// idle stream costs no CPU after kSpinBudget.
#pragma once

#include <chrono>

namespace myasic {

constexpr std::chrono::microseconds kSpinBudget{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` for up to kSpinBudget; returns whether it became true.
template <class Done>
bool spin_until(Done done) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  for (unsigned i = 1;; ++i) {
    cpu_relax();
    if (done()) return true;
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace myasic
