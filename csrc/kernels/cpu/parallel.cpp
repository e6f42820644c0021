// The kernels' threading: a small fixed pool, one parallel region at a time
// (a nested or concurrent region runs on the calling thread alone).
//
// The range is cut into a few pieces per thread, claimed one at a time, and
// the caller claims pieces too. The caller waits only for pieces a worker has
// claimed, never for a worker to arrive: on a machine where other processes
// hold the cores, a worker that is not scheduled in time simply takes no
// piece, and the region costs at most what one thread would. (A fork-join
// team such as OpenMP's waits for every thread at the end, so there one
// descheduled thread stalls the whole region for a scheduler time slice.)
// A worker that finishes a region watches for the next one for a short while
// (kWorkerSpin, yielding as it polls) and then blocks: kernels called back to
// back (a decoder layer's ops) find their workers awake, where a blocked
// worker costs tens of microseconds to wake on a virtual machine, which is
// 10-30% of a 16-thread rms_norm; an idle pool costs no CPU after kWorkerSpin.
//
// The torch extension installs its own parallel_for (set_parallel_for), which
// calls pool_parallel_for with torch's thread count.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include <chrono>

#include "kernels/cpu/spin_wait.h"
#include "kernels/kernels.h"

namespace kp {
namespace {

// How long an idle worker polls for the next region before it blocks.
constexpr std::chrono::microseconds kWorkerSpin{200};

// Starting a region touches no lock: the caller publishes the job (a sequence
// lock, job_seq_) and a generation, workers that are polling see it and read
// the job, and only the region's workers that are blocked are woken, each on
// its own condition variable. (The first pool's workers all took one mutex to
// read each job and were all woken for every region. On the GPU machine's
// 16-core Xeon, both pools in one process, old -> new: 16 us of work per
// thread took 25.0 -> 19.0 us at 4 threads and 35.0 -> 21.5 us at 16; a 16 MB
// copy over 16 threads 128.7 -> 114.1 us.)
class ThreadPool {
 public:
  explicit ThreadPool(int threads) : slots_(std::max(1, threads)) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~ThreadPool() {
    stop_.store(true);
    for (auto& slot : slots_) {
      std::lock_guard<std::mutex> lock(slot.mutex);
      slot.wake.notify_one();
    }
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn over [begin, end) in `chunks` pieces, on this thread and up to
  // threads - 1 workers.
  void run(int64_t begin, int64_t end, int threads, int64_t chunks,
           const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock<std::mutex> region(region_mutex_, std::try_to_lock);
    if (!region.owns_lock() || in_region_) {  // busy or nested: run here
      fn(begin, end);
      return;
    }
    const uint64_t generation = ++generation_;
    // The job, under the sequence lock (odd while it is written).
    job_seq_.store(2 * generation + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    job_fn_.store(&fn, std::memory_order_relaxed);
    job_begin_.store(begin, std::memory_order_relaxed);
    job_end_.store(end, std::memory_order_relaxed);
    job_chunks_.store(chunks, std::memory_order_relaxed);
    job_parts_.store(threads, std::memory_order_relaxed);
    job_seq_.store(2 * generation + 2, std::memory_order_release);
    done_.store(0, std::memory_order_relaxed);
    claim_.store(generation << 32, std::memory_order_release);
    published_.store(generation, std::memory_order_seq_cst);
    // Wake the region's workers that sleep; polling ones see published_.
    for (int i = 1; i < threads; ++i) {
      Slot& slot = slots_[i];
      if (slot.sleeping.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lock(slot.mutex);
        slot.wake.notify_one();
      }
    }
    const Job job{&fn, begin, end, chunks, threads, generation};
    in_region_ = true;
    take_chunks(job);
    in_region_ = false;
    // Pieces still running elsewhere are short (a few per thread): spin for
    // them before sleeping (spin_wait.h).
    if (spin_until([&] { return done_.load(std::memory_order_acquire) == chunks; })) return;
    std::unique_lock<std::mutex> lock(finish_mutex_);
    finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == chunks; });
  }

  // Claims pieces of the region in progress, if it has any left, on the
  // calling thread. Lock-free.
  bool help() {
    if (in_region_) return false;
    const uint64_t seen = claim_.load(std::memory_order_acquire);
    if (static_cast<int64_t>(seen & 0xffffffffu) >= job_chunks_.load(std::memory_order_relaxed)) return false;
    const Job job = read_job();
    in_region_ = true;
    take_chunks(job);  // checks the generation: a region that ended meanwhile is left alone
    in_region_ = false;
    return true;
  }

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t begin, end, chunks;
    int parts;
    uint64_t generation;
  };

  // A worker's own wake-up, on its own cache line.
  struct alignas(64) Slot {
    std::mutex mutex;
    std::condition_variable wake;
    std::atomic<bool> sleeping{false};
  };

  // The latest job, consistent (a sequence-lock read).
  Job read_job() const {
    for (;;) {
      const uint64_t s1 = job_seq_.load(std::memory_order_acquire);
      if (s1 & 1) {
        cpu_relax();
        continue;
      }
      Job job{job_fn_.load(std::memory_order_relaxed), job_begin_.load(std::memory_order_relaxed),
              job_end_.load(std::memory_order_relaxed), job_chunks_.load(std::memory_order_relaxed),
              job_parts_.load(std::memory_order_relaxed), s1 / 2 - 1};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (job_seq_.load(std::memory_order_relaxed) == s1) return job;
    }
  }

  // Claims pieces of `job` until none is left or a newer region has started.
  // A successful claim keeps the caller of run() waiting, so job.fn stays valid.
  void take_chunks(const Job& job) {
    const int64_t n = job.end - job.begin;
    uint64_t seen = claim_.load(std::memory_order_acquire);
    for (;;) {
      if ((seen >> 32) != (job.generation & 0xffffffffu)) return;
      const int64_t c = static_cast<int64_t>(seen & 0xffffffffu);
      if (c >= job.chunks) return;
      if (!claim_.compare_exchange_weak(seen, seen + 1, std::memory_order_acq_rel)) continue;
      (*job.fn)(job.begin + n * c / job.chunks, job.begin + n * (c + 1) / job.chunks);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == job.chunks) {
        std::lock_guard<std::mutex> lock(finish_mutex_);
        finished_.notify_one();
      }
      seen = claim_.load(std::memory_order_acquire);
    }
  }

  void work(int index) {
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "kp_cpu_pool");
#endif
    Slot& slot = slots_[index];
    uint64_t seen = 0;
    bool took_part = false;
    for (;;) {
      // Poll for the next region before blocking (kWorkerSpin above), if this
      // worker took part in the last one: the others (threads past the
      // region's count) block at once, so that they do not take a core, or
      // a hyperthread's share of one, from the threads that work.
      const auto deadline = std::chrono::steady_clock::now() + kWorkerSpin;
      for (unsigned i = 1; took_part && published_.load(std::memory_order_acquire) == seen; ++i) {
        cpu_relax();
        if (i % 64 == 0) {
          if (std::chrono::steady_clock::now() >= deadline) break;
          std::this_thread::yield();
        }
      }
      if (published_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(slot.mutex);
        slot.sleeping.store(true, std::memory_order_seq_cst);
        slot.wake.wait(lock, [&] {
          return stop_.load(std::memory_order_relaxed) || published_.load(std::memory_order_seq_cst) != seen;
        });
        slot.sleeping.store(false, std::memory_order_relaxed);
        if (stop_.load(std::memory_order_relaxed)) return;
      }
      const Job job = read_job();
      seen = std::max(seen, job.generation);
      took_part = index < job.parts;
      if (!took_part) continue;
      in_region_ = true;
      take_chunks(job);
      in_region_ = false;
    }
  }

  static thread_local bool in_region_;
  std::vector<Slot> slots_;  // by worker index (slot 0, the caller's, is unused)
  std::vector<std::thread> workers_;
  std::mutex region_mutex_, finish_mutex_;
  std::condition_variable finished_;
  uint64_t generation_ = 0;  // the caller's, under region_mutex_
  std::atomic<uint64_t> published_{0};  // the generation of the latest region
  // The latest job: written by run() under the sequence lock job_seq_.
  std::atomic<uint64_t> job_seq_{2};
  std::atomic<const std::function<void(int64_t, int64_t)>*> job_fn_{nullptr};
  std::atomic<int64_t> job_begin_{0}, job_end_{0}, job_chunks_{0};
  std::atomic<int> job_parts_{0};
  // The current region's generation (high 32 bits) and next piece (low 32).
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> stop_{false};
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

// Pieces per thread: enough that the threads that do run share the work
// evenly, few enough that per-piece costs (a fence after streaming stores,
// attention's per-task set-up) stay negligible.
constexpr int64_t kChunksPerThread = 8;

void default_parallel_for(int64_t begin, int64_t end, int64_t grain,
                          const std::function<void(int64_t, int64_t)>& fn) {
  pool_parallel_for(begin, end, grain, pool_threads(), fn);
}

std::atomic<ParallelFor> g_parallel_for{&default_parallel_for};

}  // namespace

int pool_threads() { return pool().size(); }

void pool_parallel_for(int64_t begin, int64_t end, int64_t grain, int max_threads,
                       const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  const int64_t grains = std::max<int64_t>(1, (end - begin) / std::max<int64_t>(1, grain));
  const int threads = static_cast<int>(std::min<int64_t>({grains, pool().size(), std::max(1, max_threads)}));
  if (threads <= 1) {
    fn(begin, end);
    return;
  }
  pool().run(begin, end, threads, std::min<int64_t>(grains, threads * kChunksPerThread), fn);
}

bool help_parallel_region() { return pool().help(); }

void set_parallel_for(ParallelFor parallel_for) {
  g_parallel_for.store(parallel_for ? parallel_for : &default_parallel_for);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  g_parallel_for.load(std::memory_order_relaxed)(begin, end, grain, fn);
}

}  // namespace kp
