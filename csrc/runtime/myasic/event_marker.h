// The completion of one kpdrEventRecord: done flag plus the steady_clock
// time at which the recorded work finished.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace myasic {

// Each record creates a fresh marker, so a kpdrStreamWaitEvent that captured
// an earlier record keeps waiting for exactly that work even if the event is
// re-recorded elsewhere meanwhile.
class EventMarker {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks the recorded work as finished and timestamps it. Idempotent.
  void complete();
  // Lock-free: polled before every small op.
  bool is_done() const { return done_.load(std::memory_order_acquire); }
  // Blocks until complete() has run.
  void wait() const;
  // Valid once is_done().
  Clock::time_point completed_at() const { return completed_at_; }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable completed_;
  std::atomic<bool> done_{false};
  Clock::time_point completed_at_{};  // written before done_ is released
};

}  // namespace myasic
