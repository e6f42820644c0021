#include "stream.h"

#include <pthread.h>

#include <string>
#include <system_error>
#include <utility>

#include "error_reporting.h"
#include "kernels/cpu/spin_wait.h"
#include "kernels/kernels.h"

namespace myasic {

Stream::~Stream() { shut_down(); }

kpdrError_t Stream::enqueue(Work work) { return enqueue_item(Item{std::move(work), nullptr}); }

kpdrError_t Stream::enqueue_item(Item item) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      return fail(KPDR_ERROR_INVALID_HANDLE,
                  "the stream was destroyed (or the process is exiting); create a new stream");
    }
    if (!worker_.joinable()) {
      try {
        worker_ = std::thread(&Stream::run_worker, this);
      } catch (const std::system_error& error) {
        return fail(KPDR_ERROR_UNKNOWN,
                    std::string("could not start the stream's worker thread: ") + error.what());
      }
    }
    queue_.push_back(std::move(item));
    pending_.fetch_add(1, std::memory_order_relaxed);
  }
  work_available_.notify_one();
  return KPDR_SUCCESS;
}

kpdrError_t Stream::record(const std::shared_ptr<EventMarker>& marker) {
  {
    // Checked under the lock so no work can slip in and be counted as done.
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_.load(std::memory_order_relaxed) == 0 && !stopping_) {
      marker->complete();
      return KPDR_SUCCESS;
    }
  }
  return enqueue_item(Item{nullptr, marker});
}

void Stream::synchronize() {
  // The host would only wait: it lends itself to the kernel library's pool,
  // which runs the simulator's kernels, while there is work to share.
  for (;;) {
    bool helped = false;
    if (!kp::spin_until([&] { return is_idle() || (helped = kp::help_parallel_region()); })) break;
    if (!helped) break;  // idle
  }
  // Past the worker's last critical section, so the markers it completed
  // there (after dropping the count this loop saw reach 0) are complete too.
  std::unique_lock<std::mutex> lock(mutex_);
  became_idle_.wait(lock, [this] { return pending_.load(std::memory_order_relaxed) == 0; });
}

void Stream::shut_down() {
  std::thread worker;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    became_idle_.wait(lock, [this] { return pending_.load(std::memory_order_relaxed) == 0; });
    stopping_ = true;
    worker = std::move(worker_);
  }
  work_available_.notify_all();
  if (worker.joinable()) worker.join();
}

void Stream::run_worker() {
  // Named so a debugger or /proc tells it apart (it would inherit its creator's name).
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "myasic_stream");
#endif
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (queue_.empty() && !stopping_) {
      // Idle: watch for the next item a while before sleeping (spin_wait.h).
      lock.unlock();
      kp::spin_until([this] { return pending_.load(std::memory_order_relaxed) > 0; });
      lock.lock();
    }
    work_available_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping_ and fully drained
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    if (item.work) item.work();
    item.work = nullptr;  // release captured buffers before reporting completion
    lock.lock();
    // Release pairs with the acquire in is_idle(): whoever sees 0 also sees
    // the bytes this work wrote. The marker completes after the count drops
    // (an event seen complete implies its stream's earlier items are counted
    // out) and inside this critical section (synchronize() passes through it).
    const bool idle = pending_.fetch_sub(1, std::memory_order_release) == 1;
    if (item.marker) item.marker->complete();
    if (idle) became_idle_.notify_all();
  }
}

}  // namespace myasic
