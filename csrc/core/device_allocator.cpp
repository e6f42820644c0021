#include "core/core.h"

#include <c10/core/Device.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "allocator_config.h"
#include "error_handler.h"

namespace kernel_pytorch {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlock = 512;          // bytes; alignment of every block
constexpr size_t kSmallLimit = 1 << 20;    // requests up to 1 MiB are "small"
constexpr size_t kLargeRound = 2 << 20;    // larger ones round up to 2 MiB
constexpr size_t kLargeBuffer = 20 << 20;  // oversize blocks may waste less than this (as CUDA)

size_t round_size(size_t n) {
  if (n <= kSmallLimit) {
    return n == 0 ? kMinBlock : (n + kMinBlock - 1) / kMinBlock * kMinBlock;
  }
  return (n + kLargeRound - 1) / kLargeRound * kLargeRound;
}

// One runtime allocation (a segment) is cut into blocks; neighbours in the
// same segment are linked so freed ones merge again. Only blocks of more than
// 1 MiB are cut (small ones stay whole, as CUDA keeps a separate small pool).
struct Block {
  void* ptr = nullptr;
  size_t size = 0;       // rounded: what the caller got, or what is cached
  size_t requested = 0;  // what the caller asked for
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;
  bool allocated = false;
  Block* prev = nullptr; // neighbours in the segment
  Block* next = nullptr;
  std::vector<c10::Stream> other_streams; // from record_stream()
  bool whole_segment() const {
    return prev == nullptr && next == nullptr;
  }
};

// Cached blocks ordered by (stream, size, address): lower_bound finds the
// smallest fitting block of a stream.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

constexpr size_t kNoWatch = std::numeric_limits<size_t>::max();

struct DevicePool {
  std::mutex mutex;
  std::unordered_map<void*, Block*> active;
  std::set<Block*, BlockLess> free_blocks;
  DeviceStats stats;
  size_t reserved = 0;
  double fraction = 1.0;
  // MY_ASIC_ALLOC_CONF & co, copied when their version changes.
  AllocatorSettings settings;
  uint64_t settings_version = 0;
  size_t initial_reserved_for = 0; // the initial_pool_size already reserved
  // The memory monitor's allocation-path watch (set_usage_watch): fires once
  // `reserved` reaches this many bytes. Derived from the watched device-use
  // threshold minus the memory others held when the runtime was last asked,
  // so the allocation path compares two numbers and calls nothing.
  std::atomic<size_t> watch_reserved{kNoWatch};
  size_t watch_used_bytes = kNoWatch; // the watched device use (total - free)
};

StatType pool_of(size_t size) {
  return size <= kSmallLimit ? StatType::SMALL_POOL : StatType::LARGE_POOL;
}

template <typename Fn>
void for_both(c10::CachingAllocator::StatArray& a, size_t size, Fn&& fn) {
  fn(a[static_cast<size_t>(StatType::AGGREGATE)]);
  fn(a[static_cast<size_t>(pool_of(size))]);
}

std::string capitalised(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
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

  // `watch_due`: set when the block is fresh device memory (not from the
  // cache) and the pool's reserved bytes reached the monitor's trigger.
  Block* malloc(c10::DeviceIndex device, size_t requested, bool* watch_due) {
    auto& p = pool(device);
    const size_t size = round_size(requested);
    const auto stream = current_stream(device).id();
    std::lock_guard<std::mutex> lock(p.mutex);
    refresh_settings(p, device);
    if (C10_UNLIKELY(p.settings.initial_pool_size != p.initial_reserved_for)) {
      reserve_initial(p, device, stream);
    }
    Block* block = take_cached(p, stream, size);
    if (block == nullptr) {
      block = fresh(p, device, size, stream);
      *watch_due = p.reserved >= p.watch_reserved.load(std::memory_order_relaxed);
    }
    block->allocated = true;
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
    if (got > p.settings.max_split_size) {
      p.stats.oversize_allocations.increase(1);
    }
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
      if (size > p.settings.max_split_size) {
        p.stats.oversize_allocations.decrease(1);
      }
      auto others = std::move(block->other_streams);
      block->other_streams.clear();
      if (!others.empty()) {
        // Another stream may still read this memory: wait for it before the
        // block can be handed out again. Done outside the lock; the block
        // stays marked allocated meanwhile, so no neighbour merges with it.
        lock.unlock();
        for (const auto& s : others) {
          synchronize_stream(s);
        }
        lock.lock();
      }
      block->allocated = false;
      p.free_blocks.insert(merge_neighbours(p, block));
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
    refresh_settings(p, device);
    DeviceStats s = p.stats;
    s.max_split_size = p.settings.max_split_size == kNoLimit ? -1 : static_cast<int64_t>(p.settings.max_split_size);
    return s;
  }

  // The most this process may reserve on `device` (bytes; kNoLimit: none) and
  // the setting that says so.
  std::pair<size_t, std::string> limit(c10::DeviceIndex device) {
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    refresh_settings(p, device);
    return limit_of(p, device);
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
    p.stats.oversize_allocations.reset_accumulated();
    p.stats.oversize_segments.reset_accumulated();
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
    p.stats.oversize_allocations.reset_peak();
    p.stats.oversize_segments.reset_peak();
  }

  void set_fraction(double fraction, c10::DeviceIndex device) {
    TORCH_CHECK(
        fraction > 0.0 && fraction <= 1.0, "my_asic: memory fraction must be in (0, 1], got ",
        fraction);
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    p.fraction = fraction;
    refresh_settings(p, device);
    trim_to_limit(p, device);
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

  // The monitor's watch (set_usage_watch): `used_bytes` of device use, or
  // kNoWatch to remove it. Asks the runtime once for what others hold.
  void set_watch(c10::DeviceIndex device, size_t used_bytes) {
    auto& p = pool(device);
    std::lock_guard<std::mutex> lock(p.mutex);
    p.watch_used_bytes = used_bytes;
    if (used_bytes == kNoWatch) {
      p.watch_reserved.store(kNoWatch, std::memory_order_relaxed);
      return;
    }
    size_t free_b = 0, total_b = 0;
    if (rt().MemGetInfo(device, &free_b, &total_b) == KPDR_SUCCESS) {
      rederive_watch(p, free_b, total_b);
    } else {
      p.watch_reserved.store(0, std::memory_order_relaxed); // check at every growth
    }
  }

  // Called whenever the runtime was asked for (free, total): the memory held
  // by others may have changed, and with it the reserved-bytes trigger.
  void saw_mem_info(c10::DeviceIndex device, size_t free_b, size_t total_b) {
    auto& p = pool(device);
    if (p.watch_reserved.load(std::memory_order_relaxed) == kNoWatch) {
      return;
    }
    std::lock_guard<std::mutex> lock(p.mutex);
    rederive_watch(p, free_b, total_b);
  }

 private:
  // Caller holds p.mutex.
  void rederive_watch(DevicePool& p, size_t free_b, size_t total_b) {
    if (p.watch_used_bytes == kNoWatch) {
      return;
    }
    const size_t used = total_b - free_b;
    const size_t others = used > p.reserved ? used - p.reserved : 0;
    p.watch_reserved.store(
        p.watch_used_bytes > others ? p.watch_used_bytes - others : 0, std::memory_order_relaxed);
  }

  // Caller holds p.mutex.
  void refresh_settings(DevicePool& p, c10::DeviceIndex device) {
    const uint64_t v = allocator_settings_version();
    if (C10_UNLIKELY(v == 0 || v != p.settings_version)) {
      p.settings = allocator_settings(); // reads the environment on first use
      p.settings_version = p.settings.version;
      trim_to_limit(p, device);
    }
  }

  // Caller holds p.mutex. A cap lowered below what is already reserved gives
  // cached segments back first, so that cached memory does not keep serving
  // requests the cap would refuse. Live tensors stay where they are.
  void trim_to_limit(DevicePool& p, c10::DeviceIndex device) {
    const size_t limit = limit_of(p, device).first;
    if (limit != kNoLimit && p.reserved > limit) {
      release_cached(p, device, limit);
    }
  }

  // Caller holds p.mutex.
  std::pair<size_t, std::string> limit_of(DevicePool& p, c10::DeviceIndex device) {
    size_t limit = p.settings.max_pool_size;
    std::string why;
    if (limit != kNoLimit) {
      why = "the my_asic allocator's max pool size (" + p.settings.max_pool_size_origin + ")";
    }
    if (p.fraction < 1.0) {
      const size_t total = device_properties(device).total_memory;
      const auto by_fraction = static_cast<size_t>(p.fraction * static_cast<double>(total));
      if (by_fraction < limit) {
        limit = by_fraction;
        std::ostringstream f;
        f << "the per-process memory fraction (" << p.fraction << " of " << format_bytes(total)
          << ", set by set_per_process_memory_fraction)";
        why = f.str();
      }
    }
    return {limit, why};
  }

  // Caller holds p.mutex. The initial reservation is one cached segment.
  void reserve_initial(DevicePool& p, c10::DeviceIndex device, c10::StreamId stream) {
    const size_t want = p.settings.initial_pool_size;
    p.initial_reserved_for = want;
    if (want == 0 || p.reserved >= want) {
      return;
    }
    const size_t size = round_up(want - p.reserved, kLargeRound);
    const size_t limit = limit_of(p, device).first;
    void* ptr = nullptr;
    if ((limit != kNoLimit && p.reserved + size > limit) || rt().Malloc(device, &ptr, size) != KPDR_SUCCESS) {
      TORCH_WARN(
          "my_asic: could not reserve initial_pool_size_mb:", want >> 20, " on device ", static_cast<int>(device),
          "; the allocator grows on demand instead.");
      return;
    }
    p.free_blocks.insert(new_segment(p, device, ptr, size, stream));
  }

  // Caller holds p.mutex. Accounts a fresh runtime allocation as a segment.
  Block* new_segment(DevicePool& p, c10::DeviceIndex device, void* ptr, size_t size, c10::StreamId stream) {
    p.reserved += size;
    p.stats.num_device_alloc += 1;
    for_both(p.stats.segment, size, [](auto& s) { s.increase(1); });
    for_both(p.stats.reserved_bytes, size, [&](auto& s) { s.increase(size); });
    if (size > p.settings.max_split_size) {
      p.stats.oversize_segments.increase(1);
    }
    auto* block = new Block();
    block->ptr = ptr;
    block->size = size;
    block->device = device;
    block->stream = stream;
    return block;
  }

  // Cuts `block` (not in free_blocks) to `size`; the rest is cached.
  void split(DevicePool& p, Block* block, size_t size) {
    auto* rest = new Block();
    rest->ptr = static_cast<char*>(block->ptr) + size;
    rest->size = block->size - size;
    rest->device = block->device;
    rest->stream = block->stream;
    rest->prev = block;
    rest->next = block->next;
    if (block->next) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    p.free_blocks.insert(rest);
  }

  // Joins a freed block with its free neighbours; returns the joined block.
  Block* merge_neighbours(DevicePool& p, Block* block) {
    if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
      p.free_blocks.erase(prev); // before its size (the set's key) changes
      prev->size += block->size;
      prev->next = block->next;
      if (block->next) block->next->prev = prev;
      delete block;
      block = prev;
    }
    if (Block* next = block->next; next != nullptr && !next->allocated) {
      p.free_blocks.erase(next);
      block->size += next->size;
      block->next = next->next;
      if (next->next) next->next->prev = block;
      delete next;
    }
    return block;
  }

  Block* take_cached(DevicePool& p, c10::StreamId stream, size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = p.free_blocks.lower_bound(&key);
    if (it == p.free_blocks.end() || (*it)->stream != stream) {
      return nullptr;
    }
    Block* block = *it;
    const size_t have = block->size;
    const size_t max_split = p.settings.max_split_size;
    if (size <= kSmallLimit) {
      // Small requests take a whole small block wasting at most an eighth of it.
      if (have - size > std::max(size / 8, kMinBlock)) {
        return nullptr;
      }
    } else if (size < max_split && have > max_split) {
      return nullptr; // blocks above max_split_size serve only requests above it
    } else if (size >= max_split && have >= size + kLargeBuffer) {
      return nullptr; // nor waste 20 MiB or more on one
    }
    p.free_blocks.erase(it);
    if (size > kSmallLimit && have <= max_split && have - size > kSmallLimit) {
      split(p, block, size);
    }
    return block;
  }

  Block* fresh(DevicePool& p, c10::DeviceIndex device, size_t size, c10::StreamId stream) {
    const auto& api = rt();
    const auto& s = p.settings;
    const auto [limit, limit_reason] = limit_of(p, device);
    // Growth policy: a large request may take a bigger segment (growth_factor),
    // cut to size, so the pool grows in fewer runtime calls.
    size_t segment = size;
    if (size > kSmallLimit && s.growth_factor > 1.0 && size < s.max_split_size) {
      const auto grow = static_cast<size_t>((s.growth_factor - 1.0) * static_cast<double>(p.reserved));
      segment = std::max(size, round_up(grow, kLargeRound));
      segment = std::min(segment, std::max(size, s.max_split_size / kLargeRound * kLargeRound));
      if (limit != kNoLimit) {
        const size_t room = limit > p.reserved ? (limit - p.reserved) / kLargeRound * kLargeRound : 0;
        segment = std::max(size, std::min(segment, room));
      }
    }
    if (s.garbage_collection_threshold > 0.0) {
      // Give cached segments back before the pool passes the threshold.
      const size_t base = limit != kNoLimit ? limit : device_properties(device).total_memory;
      const auto threshold = static_cast<size_t>(s.garbage_collection_threshold * static_cast<double>(base));
      if (p.reserved + segment > threshold) {
        release_cached(p, device, threshold > segment ? threshold - segment : 0);
      }
    }
    if (limit != kNoLimit && p.reserved + size > limit) {
      // Cached blocks count against the cap: give them back and retry.
      release_cached(p, device);
      p.stats.num_alloc_retries += 1;
      if (p.reserved + size > limit) {
        p.stats.num_ooms += 1;
        throw_oom(p, device, size,
                  limit_reason + " would be exceeded: it allows " + format_bytes(limit) + " and " +
                      format_bytes(p.reserved) + " is already reserved");
      }
    }
    void* ptr = nullptr;
    kpdrError_t err = api.Malloc(device, &ptr, segment);
    if (err == KPDR_ERROR_OUT_OF_MEMORY && segment > size) {
      segment = size; // the growth policy never causes an out-of-memory error
      err = api.Malloc(device, &ptr, segment);
    }
    if (err == KPDR_ERROR_OUT_OF_MEMORY) {
      release_cached(p, device);
      p.stats.num_alloc_retries += 1;
      err = api.Malloc(device, &ptr, segment);
    }
    if (err == KPDR_ERROR_OUT_OF_MEMORY) {
      p.stats.num_ooms += 1;
      const char* why = api.GetLastErrorMessage();
      throw_oom(p, device, size, "", why ? why : "");
    }
    KPDR_CHECK(err);
    Block* block = new_segment(p, device, ptr, segment, stream);
    if (segment > size) {
      split(p, block, size);
    }
    return block;
  }

  // Returns cached whole segments to the runtime until at most `down_to`
  // bytes stay reserved (all of them by default).
  void release_cached(DevicePool& p, c10::DeviceIndex device, size_t down_to = 0) {
    const auto& api = rt();
    for (auto it = p.free_blocks.begin(); it != p.free_blocks.end() && p.reserved > down_to;) {
      Block* block = *it;
      if (!block->whole_segment()) {
        ++it; // part of a segment still in use
        continue;
      }
      it = p.free_blocks.erase(it);
      KPDR_CHECK(api.Free(device, block->ptr));
      p.reserved -= block->size;
      p.stats.num_device_free += 1;
      for_both(p.stats.segment, block->size, [](auto& s) { s.decrease(1); });
      for_both(p.stats.reserved_bytes, block->size, [&](auto& s) { s.decrease(block->size); });
      if (block->size > p.settings.max_split_size) {
        p.stats.oversize_segments.decrease(1);
      }
      delete block;
    }
  }

  // Caller holds p.mutex. `limit_detail`: why a cap refused ("" when the
  // runtime did); `runtime_reason`: the runtime's message for a failed kpdrMalloc.
  [[noreturn]] void throw_oom(DevicePool& p, c10::DeviceIndex device, size_t size, const std::string& limit_detail,
                              const std::string& runtime_reason = "") {
    size_t free_b = 0, total_b = 0;
    rt().MemGetInfo(device, &free_b, &total_b);
    // The device had room, yet the runtime failed: something else ran out (the
    // simulator's host memory, a driver's own). Say what the runtime says, not
    // "out of memory" beside a free figure that contradicts it.
    TORCH_CHECK_WITH(
        OutOfMemoryError, !limit_detail.empty() || free_b < size || runtime_reason.empty(),
        "my_asic could not allocate ", format_bytes(size), " (", size, " bytes) on device ",
        static_cast<int>(device), ", which has ", format_bytes(free_b), " free of ", format_bytes(total_b),
        ": the device runtime failed: ", runtime_reason);
    // torch.cuda's message shape, so tools that read CUDA's read this one.
    const size_t allocated = static_cast<size_t>(
        p.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "my_asic out of memory. Tried to allocate ", format_bytes(size), " (", size,
        " bytes). Device ", static_cast<int>(device), " has a total capacity of ", format_bytes(total_b),
        " of which ", format_bytes(free_b), " is free. Of the memory this process reserved, ",
        format_bytes(allocated), " is allocated by PyTorch, and ",
        format_bytes(p.reserved > allocated ? p.reserved - allocated : 0),
        " is reserved by PyTorch but unallocated.",
        limit_detail.empty() ? std::string() : " " + capitalised(limit_detail) + ".",
        " Free tensors you no longer need, call torch.my_asic.empty_cache(), or use a smaller batch.");
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

// The memory monitor's allocation-path watch, per device (set_usage_watch):
// the callback and the device use it watches for. The trigger the allocation
// path compares with lives in the device's pool (DevicePool::watch_reserved).
constexpr int kMaxWatchedDevices = 128;
std::mutex g_watch_mutex;
std::shared_ptr<std::function<void(size_t, size_t)>> g_watch_fn[kMaxWatchedDevices];
size_t g_watch_bytes[kMaxWatchedDevices]; // guarded by g_watch_mutex
thread_local bool t_in_watch = false;

// Slow path, taken only when the pool's reserved bytes reached the trigger:
// asks the runtime for the real device use (others' memory included).
void check_usage_watch(c10::DeviceIndex device) {
  if (t_in_watch || device >= kMaxWatchedDevices) {
    return;
  }
  size_t free_b = 0, total_b = 0;
  if (rt().MemGetInfo(device, &free_b, &total_b) != KPDR_SUCCESS) {
    return;
  }
  impl().saw_mem_info(device, free_b, total_b); // others may hold less now: move the trigger
  std::shared_ptr<std::function<void(size_t, size_t)>> fn;
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    if (total_b - free_b < g_watch_bytes[device]) {
      return;
    }
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
    g_watch_bytes[device] = threshold_bytes;
    impl().set_watch(device, threshold_bytes);
  } else {
    impl().set_watch(device, kNoWatch);
    g_watch_fn[device].reset();
  }
}

size_t device_pool_limit(c10::DeviceIndex device) {
  return impl().limit(device).first;
}

c10::DataPtr MyAsicDeviceAllocator::allocate(size_t nbytes) {
  return allocate_on(current_device(), nbytes);
}

c10::DataPtr MyAsicDeviceAllocator::allocate_on(c10::DeviceIndex device, size_t nbytes) {
  bool watch_due = false;
  Block* block = nullptr;
  try {
    block = impl().malloc(device, nbytes, &watch_due);
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
    block = impl().malloc(device, nbytes, &watch_due);
  }
  if (C10_UNLIKELY(watch_due)) {
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
  impl().saw_mem_info(device, free_b, total_b); // the monitor's samples keep its trigger current
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
