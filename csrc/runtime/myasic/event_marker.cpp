#include "event_marker.h"

#include "kernels/cpu/spin_wait.h"

namespace myasic {

void EventMarker::complete() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_.load(std::memory_order_relaxed)) return;
    completed_at_ = Clock::now();
    done_.store(true, std::memory_order_release);
  }
  completed_.notify_all();
}

void EventMarker::wait() const {
  if (kp::spin_until([this] { return is_done(); })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
}

}  // namespace myasic
