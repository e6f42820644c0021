// A simulated device stream: a FIFO of work run by one worker thread, so work
// on a stream runs strictly in submission order while different streams run
// concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "event_marker.h"
#include "kpdr.h"

namespace myasic {

class Stream {
 public:
  using Work = std::function<void()>;

  Stream(int device, int priority) : device_(device), priority_(priority) {}
  // Drains pending work and joins the worker.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  // Stored only: lower is higher priority, but scheduling ignores it.
  int priority() const { return priority_; }

  // Appends work. The worker thread starts on first use, so streams that are
  // created but never used (e.g. pools) cost no thread.
  kpdrError_t enqueue(Work work);
  // Completes `marker` once everything submitted so far has run; inline when
  // the stream is already idle (no worker round trip).
  kpdrError_t record(const std::shared_ptr<EventMarker>& marker);
  // Lock-free check that all submitted work has finished.
  bool is_idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  // Blocks until all submitted work has finished; an atomic load when idle.
  void synchronize();
  // Drains, stops and joins the worker; later enqueues fail. Idempotent.
  void shut_down();

 private:
  void run_worker();

  const int device_;
  const int priority_;
  mutable std::mutex mutex_;
  std::condition_variable work_available_;
  std::condition_variable became_idle_;
  // An item runs `work` (may be empty) and then, with the stream's count of
  // pending items already dropped, completes `marker` (may be null): whoever
  // sees the event complete sees the stream idle too when nothing followed it.
  struct Item {
    Work work;
    std::shared_ptr<EventMarker> marker;
  };
  kpdrError_t enqueue_item(Item item);

  std::deque<Item> queue_;          // guarded by mutex_
  bool stopping_ = false;           // guarded by mutex_
  std::thread worker_;              // guarded by mutex_
  // Queued plus running items; modified under mutex_, read lock-free.
  std::atomic<std::uint64_t> pending_{0};
};

}  // namespace myasic
