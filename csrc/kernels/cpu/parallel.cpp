// The kernels' default threading: a small fixed pool, one parallel region at
// a time (a nested or concurrent region runs on the calling thread alone).
// The torch extension replaces it with at::parallel_for (set_parallel_for).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/kernels.h"

namespace kp {
namespace {

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(begin, end) over `parts` slices of the range, one per thread.
  void run(int64_t begin, int64_t end, int parts, const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock<std::mutex> region(region_mutex_, std::try_to_lock);
    if (!region.owns_lock() || in_region_) {  // busy or nested: run here
      fn(begin, end);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      begin_ = begin;
      end_ = end;
      parts_ = parts;
      remaining_ = parts - 1;
      ++generation_;
    }
    wake_.notify_all();
    in_region_ = true;
    slice(0);
    in_region_ = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return remaining_ == 0; });
    fn_ = nullptr;
  }

 private:
  void slice(int part) {
    const int64_t n = end_ - begin_;
    const int64_t b = begin_ + n * part / parts_, e = begin_ + n * (part + 1) / parts_;
    if (b < e) (*fn_)(b, e);
  }
  void work(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index >= parts_) continue;
      }
      in_region_ = true;
      slice(index);
      in_region_ = false;
      std::lock_guard<std::mutex> lock(mutex_);
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  static thread_local bool in_region_;
  std::vector<std::thread> workers_;
  std::mutex region_mutex_, mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0;
  int parts_ = 0, remaining_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};
thread_local bool ThreadPool::in_region_ = false;

int default_threads() {
  if (const char* env = std::getenv("KP_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  // Leaked on purpose: worker threads must not be joined during static
  // destruction, when the process may be exiting from any thread.
  static ThreadPool* p = new ThreadPool(default_threads());
  return *p;
}

void pool_parallel_for(int64_t begin, int64_t end, int64_t grain,
                       const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  const int64_t max_parts = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int parts = static_cast<int>(std::min<int64_t>(max_parts, pool().size()));
  if (parts <= 1) {
    fn(begin, end);
    return;
  }
  pool().run(begin, end, parts, fn);
}

std::atomic<ParallelFor> g_parallel_for{&pool_parallel_for};

}  // namespace

void set_parallel_for(ParallelFor parallel_for) {
  g_parallel_for.store(parallel_for ? parallel_for : &pool_parallel_for);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  g_parallel_for.load(std::memory_order_relaxed)(begin, end, grain, fn);
}

}  // namespace kp
