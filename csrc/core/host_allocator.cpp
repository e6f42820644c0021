#include "core/core.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>


namespace kernel_pytorch {
namespace {

struct PinnedBlock {
  size_t size = 0;
  std::vector<kpdrEvent_t> pending; // copies that may still use the block
};

class PinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    process_deferred();
    void* ptr = nullptr;
    if (nbytes > 0) {
      KPDR_CHECK(rt().MallocHost(&ptr, nbytes));
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_.emplace(ptr, PinnedBlock{nbytes, {}});
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(nbytes);
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(nbytes);
      stats_.num_host_alloc += 1;
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_pinned;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    void* key = ctx ? ctx : ptr;
    kpdrEvent_t event = nullptr;
    const auto& api = rt();
    KPDR_CHECK(api.EventCreate(stream.device_index(), KPDR_EVENT_DISABLE_TIMING, &event));
    KPDR_CHECK(api.EventRecord(event, native_stream(stream)));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(key);
    if (it == blocks_.end()) {
      api.EventDestroy(event);
      return false;
    }
    it->second.pending.push_back(event);
    return true;
  }

  void empty_cache() override {
    process_deferred();
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocations.reset_accumulated();
    stats_.allocated_bytes.reset_accumulated();
    stats_.active_requests.reset_accumulated();
    stats_.active_bytes.reset_accumulated();
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocations.reset_peak();
    stats_.allocated_bytes.reset_peak();
    stats_.active_requests.reset_peak();
    stats_.active_bytes.reset_peak();
  }

  void release(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = blocks_.find(ptr);
      TORCH_INTERNAL_ASSERT(it != blocks_.end(), "my_asic: freeing unknown pinned memory");
      stats_.active_requests.decrease(1);
      stats_.active_bytes.decrease(it->second.size);
      deferred_.push_back(ptr);
    }
    process_deferred();
  }

 private:
  static void free_pinned(void* ptr);

  // Frees released blocks whose recorded copies have all completed.
  void process_deferred() {
    if (!runtime_initialized()) {
      return;
    }
    const auto& api = rt();
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<void*> still_pending;
    for (void* ptr : deferred_) {
      auto& block = blocks_.at(ptr);
      bool done = true;
      for (kpdrEvent_t e : block.pending) {
        if (api.EventQuery(e) == KPDR_ERROR_NOT_READY) {
          done = false;
          break;
        }
      }
      if (!done) {
        still_pending.push_back(ptr);
        continue;
      }
      for (kpdrEvent_t e : block.pending) {
        api.EventDestroy(e);
      }
      stats_.allocations.decrease(1);
      stats_.allocated_bytes.decrease(block.size);
      stats_.num_host_free += 1;
      blocks_.erase(ptr);
      KPDR_CHECK(api.FreeHost(ptr));
    }
    deferred_ = std::move(still_pending);
  }

  std::mutex mutex_;
  std::unordered_map<void*, PinnedBlock> blocks_;
  std::vector<void*> deferred_;
  at::HostStats stats_;
};

PinnedHostAllocator& pinned() {
  static auto* a = new PinnedHostAllocator(); // leaked: outlives static tensors
  return *a;
}

void PinnedHostAllocator::free_pinned(void* ptr) {
  pinned().release(ptr);
}

} // namespace

at::HostAllocator* host_allocator() {
  return &pinned();
}

bool is_pinned_ptr(const void* ptr) {
  if (ptr == nullptr || !runtime_initialized()) {
    return false;
  }
  // Any address inside a pinned block counts (tensors may start mid-block).
  int device = 0;
  return rt().PointerGetDevice(ptr, &device) == KPDR_SUCCESS && device == -1;
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &pinned())

} // namespace kernel_pytorch
