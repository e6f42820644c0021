#include "core/core.h"

#include <c10/core/Device.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "error_handler.h"

namespace kernel_pytorch {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlock = 512;          // bytes; alignment of every block
constexpr size_t kSmallLimit = 1 << 20;    // requests up to 1 MiB are "small"
constexpr size_t kLargeRound = 2 << 20;    // larger ones round up to 2 MiB

size_t round_size(size_t n) {
  if (n <= kSmallLimit) {
    return n == 0 ? kMinBlock : (n + kMinBlock - 1) / kMinBlock * kMinBlock;
  }
  return (n + kLargeRound - 1) / kLargeRound * kLargeRound;
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;       // rounded, what the runtime handed out
  size_t requested = 0;  // what the caller asked for
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;
  std::vector<c10::Stream> other_streams; // from record_stream()
};

struct DevicePool {
  std::mutex mutex;
  std::unordered_map<void*, Block*> active;
  // Cached free blocks by (stream, size).
  std::map<std::pair<c10::StreamId, size_t>, std::vector<Block*>> free_blocks;
  DeviceStats stats;
  size_t reserved = 0;
  double fraction = 1.0;
};

StatType pool_of(size_t size) {
  return size <= kSmallLimit ? StatType::SMALL_POOL : StatType::LARGE_POOL;
}

template <typename Fn>
void for_both(c10::CachingAllocator::StatArray& a, size_t size, Fn&& fn) {
  fn(a[static_cast<size_t>(StatType::AGGREGATE)]);
  fn(a[static_cast<size_t>(pool_of(size))]);
}

class Impl {
 public:
  DevicePool& pool(c10::DeviceIndex device) {
    check_device_index(device);
    std::call_once(sized_, [this] {
      const auto n = device_count();
      for (int i = 0; i < n; ++i) {
        pools_.emplace_back(std::make_unique<DevicePool>());
      }
    });
    return *pools_[device];
  }

  // `grew`: set when the block is fresh device memory (not from the cache).
  Block* malloc(c10::DeviceIndex device, size_t requested, bool* grew) {
    auto& p = pool(device);
    const size_t size = round_size(requested);
    const auto stream = current_stream(device).id();
    std::lock_guard<std::mutex> lock(p.mutex);
    Block* block = take_cached(p, stream, size);
    if (block == nullptr) {
      block = fresh(p, device, size, stream);
      *grew = true;
    }
    block->requested = requested;
    p.active.emplace(block->ptr, block);
    // Count the block actually handed out (a cached one may be larger than
    // the rounded request): free() subtracts exactly this.
    const size_t got = block->size;
    for_both(p.stats.allocation, got, [](auto& s) { s.increase(1); });
    for_both(p.stats.active, got, [](auto& s) { s.increase(1); });
    for_both(p.stats.allocated_bytes, got, [&](auto& s) { s.increase(got); });
    for_both(p.stats.active_bytes, got, [&](auto& s) { s.increase(got); });
    for_both(p.stats.requested_bytes, got, [&](auto& s) { s.increase(requested); });
    return block;
  }

  void free(void* ptr) {
    // The device is not in the pointer; look in each pool (few devices).
    for (auto& pp : pools_) {
      auto& p = *pp;
      std::unique_lock<std::mutex> lock(p.mutex);
      auto it = p.active.find(ptr);
      if (it == p.active.end()) {
        continue;
      }
      Block* block = it->second;
      p.active.erase(it);
      const size_t size = block->size;
      for_both(p.stats.allocation, size, [](auto& s) { s.decrease(1); });
      for_both(p.stats.active, size, [](auto& s) { s.decrease(1); });
      for_both(p.stats.allocated_bytes, size, [&](auto& s) { s.decrease(size); });
      for_both(p.stats.active_bytes, size, [&](auto& s) { s.decrease(size); });
      for_both(p.stats.requested_bytes, size, [&](auto& s) { s.decrease(block->requested); });
      auto others = std::move(block->other_streams);
      block->other_streams.clear();
      if (!others.empty()) {
        // Another stream may still read this memory: wait for it before the
        // block can be handed out again. Done outside the lock.
        lock.unlock();
        for (const auto& s : others) {
          synchronize_stream(s);
        }
        lock.lock();
      }
      p.free_blocks[{block->stream, size}].push_back(block);
      return;
    }
    TORCH_INTERNAL_ASSERT(false, "my_asic allocator: freeing an unknown pointer ", ptr);
  }

  void record_stream(void* ptr, const c10::Stream& stream) {
    auto& p = pool(stream.device_index());
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.active.find(ptr);
    TORCH_CHECK(it != p.active.end(), "my_asic: record_stream() on memory not allocated on ",
                stream.device(), " by this allocator");
    if (stream.id() != it->second->stream) {
      it->second->other_streams.push_back(stream);
    }
  }

  void empty_cache() {
    for (size_t d = 0; d < pools_.size(); ++d) {
      auto& p = *pools_[d];
      std::lock_guard<std::mutex> lock(p.mutex);
      release_cached(p, static_cast<c10::DeviceIndex>(d));
    }
  }

  DeviceStats stats(c10::DeviceIndex device) {
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    return p.stats;
  }

  void reset_accumulated(c10::DeviceIndex device) {
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    auto reset = [](c10::CachingAllocator::StatArray& a) {
      for (auto& s : a) s.reset_accumulated();
    };
    reset(p.stats.allocation); reset(p.stats.segment); reset(p.stats.active);
    reset(p.stats.allocated_bytes); reset(p.stats.reserved_bytes);
    reset(p.stats.active_bytes); reset(p.stats.requested_bytes);
    p.stats.num_alloc_retries = 0;
    p.stats.num_ooms = 0;
    p.stats.num_device_alloc = 0;
    p.stats.num_device_free = 0;
  }

  void reset_peak(c10::DeviceIndex device) {
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    auto reset = [](c10::CachingAllocator::StatArray& a) {
      for (auto& s : a) s.reset_peak();
    };
    reset(p.stats.allocation); reset(p.stats.segment); reset(p.stats.active);
    reset(p.stats.allocated_bytes); reset(p.stats.reserved_bytes);
    reset(p.stats.active_bytes); reset(p.stats.requested_bytes);
  }

  void set_fraction(double fraction, c10::DeviceIndex device) {
    TORCH_CHECK(
        fraction > 0.0 && fraction <= 1.0, "my_asic: memory fraction must be in (0, 1], got ",
        fraction);
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    p.fraction = fraction;
  }

  double get_fraction(c10::DeviceIndex device) {
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    return p.fraction;
  }

  bool owns(const void* ptr) {
    for (auto& pp : pools_) {
      std::lock_guard<std::mutex> lock(pp->mutex);
      if (pp->active.count(const_cast<void*>(ptr))) {
        return true;
      }
    }
    return false;
  }

 private:
  Block* take_cached(DevicePool& p, c10::StreamId stream, size_t size) {
    // Smallest cached block of this stream that is big enough without wasting
    // more than an eighth of it (blocks are never split).
    auto it = p.free_blocks.lower_bound({stream, size});
    if (it == p.free_blocks.end() || it->first.first != stream) {
      return nullptr;
    }
    const size_t have = it->first.second;
    if (have - size > std::max(size / 8, kMinBlock)) {
      return nullptr;
    }
    Block* block = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) {
      p.free_blocks.erase(it);
    }
    return block;
  }

  Block* fresh(DevicePool& p, c10::DeviceIndex device, size_t size, c10::StreamId stream) {
    const auto& api = rt();
    const auto& props = device_properties(device);
    const size_t limit = static_cast<size_t>(p.fraction * static_cast<double>(props.total_memory));
    if (p.fraction < 1.0 && p.reserved + size > limit) {
      // Cached blocks count against the cap: give them back and retry.
      release_cached(p, device);
      p.stats.num_alloc_retries += 1;
      if (p.reserved + size > limit) {
        p.stats.num_ooms += 1;
        throw_oom(device, size, "the per-process memory fraction (" + std::to_string(p.fraction) +
                                    " of " + format_bytes(props.total_memory) + ", set by "
                                    "set_per_process_memory_fraction) would be exceeded: " +
                                    format_bytes(p.reserved) + " already reserved by this process");
      }
    }
    void* ptr = nullptr;
    kpdrError_t err = api.Malloc(device, &ptr, size);
    if (err == KPDR_ERROR_OUT_OF_MEMORY) {
      release_cached(p, device);
      p.stats.num_alloc_retries += 1;
      err = api.Malloc(device, &ptr, size);
    }
    if (err == KPDR_ERROR_OUT_OF_MEMORY) {
      p.stats.num_ooms += 1;
      const char* why = api.GetLastErrorMessage();
      throw_oom(device, size, "", why ? why : "");
    }
    KPDR_CHECK(err);
    p.reserved += size;
    p.stats.num_device_alloc += 1;
    for_both(p.stats.segment, size, [](auto& s) { s.increase(1); });
    for_both(p.stats.reserved_bytes, size, [&](auto& s) { s.increase(size); });
    auto* block = new Block();
    block->ptr = ptr;
    block->size = size;
    block->device = device;
    block->stream = stream;
    return block;
  }

  void release_cached(DevicePool& p, c10::DeviceIndex device) {
    if (p.free_blocks.empty()) {
      return;
    }
    const auto& api = rt();
    for (auto& entry : p.free_blocks) {
      for (Block* block : entry.second) {
        KPDR_CHECK(api.Free(device, block->ptr));
        p.reserved -= block->size;
        p.stats.num_device_free += 1;
        for_both(p.stats.segment, block->size, [](auto& s) { s.decrease(1); });
        for_both(p.stats.reserved_bytes, block->size, [&](auto& s) { s.decrease(block->size); });
        delete block;
      }
    }
    p.free_blocks.clear();
  }

  // `runtime_reason`: the runtime's message for a failed kpdrMalloc ("" otherwise).
  [[noreturn]] void throw_oom(c10::DeviceIndex device, size_t size, const std::string& detail,
                              const std::string& runtime_reason = "") {
    size_t free_b = 0, total_b = 0;
    rt().MemGetInfo(device, &free_b, &total_b);
    // The device had room, yet the runtime failed: something else ran out (the
    // simulator's host memory, a driver's own). Say what the runtime says, not
    // "out of memory on device" beside a free figure that contradicts it.
    TORCH_CHECK_WITH(
        OutOfMemoryError, free_b < size || runtime_reason.empty(), "my_asic could not allocate ",
        format_bytes(size), " (", size, " bytes) on device ", static_cast<int>(device),
        ", which has ", format_bytes(free_b), " free of ", format_bytes(total_b),
        ": the device runtime failed: ", runtime_reason);
    // The runtime's message restates the request and the free memory read here;
    // repeating it would say everything twice.
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "my_asic out of memory on device ", static_cast<int>(device),
        ": tried to allocate ", format_bytes(size), " (", size, " bytes); the device has ",
        format_bytes(free_b), " free of ", format_bytes(total_b), " total",
        detail.empty() ? std::string() : "; " + detail,
        ". Free tensors you no longer need, call torch.my_asic.empty_cache(), or use a "
        "smaller batch.");
  }

  std::once_flag sized_;
  std::vector<std::unique_ptr<DevicePool>> pools_;
};

Impl& impl() {
  static auto* i = new Impl(); // leaked: tensors may die during static destruction
  return *i;
}

void delete_block(void* ptr) {
  impl().free(ptr);
}

// The memory monitor's allocation-path watch, per device (set_usage_watch).
constexpr size_t kNoWatch = std::numeric_limits<size_t>::max();
constexpr int kMaxWatchedDevices = 128;
std::atomic<size_t> g_watch_bytes[kMaxWatchedDevices];
std::mutex g_watch_mutex;
std::shared_ptr<std::function<void(size_t, size_t)>> g_watch_fn[kMaxWatchedDevices];
thread_local bool t_in_watch = false;

bool init_watches() {
  for (auto& w : g_watch_bytes) {
    w.store(kNoWatch);
  }
  return true;
}
const bool g_watches_ready = init_watches();

void check_usage_watch(c10::DeviceIndex device) {
  if (device >= kMaxWatchedDevices || C10_LIKELY(g_watch_bytes[device].load(std::memory_order_relaxed) == kNoWatch) ||
      t_in_watch) {
    return;
  }
  size_t free_b = 0, total_b = 0;
  if (rt().MemGetInfo(device, &free_b, &total_b) != KPDR_SUCCESS || total_b - free_b < g_watch_bytes[device].load()) {
    return;
  }
  std::shared_ptr<std::function<void(size_t, size_t)>> fn;
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    fn = g_watch_fn[device];
  }
  if (fn) {
    t_in_watch = true; // allocations made by the watch itself are not watched
    try {
      (*fn)(total_b - free_b, total_b);
    } catch (const std::exception& e) {
      TORCH_WARN("my_asic: the memory watch raised (ignored): ", e.what());
    }
    t_in_watch = false;
  }
}

} // namespace

void set_usage_watch(c10::DeviceIndex device, size_t threshold_bytes, std::function<void(size_t, size_t)> fn) {
  check_device_index(device);
  TORCH_CHECK(device < kMaxWatchedDevices, "my_asic: memory watches cover devices 0..", kMaxWatchedDevices - 1);
  std::lock_guard<std::mutex> lock(g_watch_mutex);
  if (fn) {
    g_watch_fn[device] = std::make_shared<std::function<void(size_t, size_t)>>(std::move(fn));
    g_watch_bytes[device].store(threshold_bytes);
  } else {
    g_watch_bytes[device].store(kNoWatch);
    g_watch_fn[device].reset();
  }
}

c10::DataPtr MyAsicDeviceAllocator::allocate(size_t nbytes) {
  return allocate_on(current_device(), nbytes);
}

c10::DataPtr MyAsicDeviceAllocator::allocate_on(c10::DeviceIndex device, size_t nbytes) {
  bool grew = false;
  Block* block = nullptr;
  try {
    block = impl().malloc(device, nbytes, &grew);
  } catch (const c10::OutOfMemoryError& e) {
    // The pool's lock is released here: the error handler may free memory
    // (empty_cache) and ask for one retry (error_handler.h).
    DeviceErrorInfo info;
    info.device = device;
    info.kind = "out_of_memory";
    info.message = e.what_without_backtrace();
    info.op = "allocation";
    info.requested_bytes = nbytes;
    info.retryable = true;
    if (!notify_device_error(info)) {
      throw;
    }
    block = impl().malloc(device, nbytes, &grew);
  }
  if (grew) {
    check_usage_watch(device);
  }
  return {block->ptr, block->ptr, &delete_block, c10::Device(c10::DeviceType::PrivateUse1, device)};
}

c10::DeleterFnPtr MyAsicDeviceAllocator::raw_deleter() const {
  return &delete_block;
}

void MyAsicDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  // Used by storage clones: an ordered device-to-device copy on the current stream.
  auto stream = current_stream(current_device());
  memcpy_async(dest, src, count, KPDR_MEMCPY_DEVICE_TO_DEVICE, stream);
  synchronize_stream(stream);
}

bool MyAsicDeviceAllocator::initialized() {
  return runtime_initialized();
}

void MyAsicDeviceAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  impl().empty_cache();
}

void MyAsicDeviceAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  if (ptr.get() == nullptr || ptr.get_deleter() != &delete_block) {
    return; // not ours (e.g. an empty tensor)
  }
  impl().record_stream(ptr.get_context(), stream);
}

c10::CachingDeviceAllocator::DeviceStats MyAsicDeviceAllocator::getDeviceStats(c10::DeviceIndex device) {
  return impl().stats(device);
}

void MyAsicDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  impl().reset_accumulated(device);
}

void MyAsicDeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  impl().reset_peak(device);
}

std::pair<size_t, size_t> MyAsicDeviceAllocator::getMemoryInfo(c10::DeviceIndex device) {
  check_device_index(device);
  size_t free_b = 0, total_b = 0;
  KPDR_CHECK(rt().MemGetInfo(device, &free_b, &total_b));
  return {free_b, total_b};
}

void MyAsicDeviceAllocator::setMemoryFraction(double fraction, c10::DeviceIndex device) {
  impl().set_fraction(fraction, device);
}

double MyAsicDeviceAllocator::getMemoryFraction(c10::DeviceIndex device) {
  return impl().get_fraction(device);
}

bool MyAsicDeviceAllocator::owns(const void* ptr) {
  return impl().owns(ptr);
}

MyAsicDeviceAllocator& device_allocator() {
  static MyAsicDeviceAllocator allocator;
  return allocator;
}

void resize_device_storage(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(
      storage->resizable(),
      "my_asic: trying to resize storage that is not resizable (it was not allocated by "
      "torch, e.g. it wraps external memory).");
  if (nbytes == storage->nbytes()) {
    return;
  }
  const auto device = storage->device().index();
  c10::DataPtr fresh = device_allocator().allocate_on(device, nbytes);
  const size_t keep = std::min(storage->nbytes(), nbytes);
  if (keep > 0) {
    auto stream = current_stream(device);
    memcpy_async(fresh.get(), storage->data(), keep, KPDR_MEMCPY_DEVICE_TO_DEVICE, stream);
    synchronize_stream(stream);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

// Registered at load time: tensors on my_asic allocate through it.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &device_allocator());

} // namespace kernel_pytorch
