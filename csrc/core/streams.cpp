#include "core/core.h"


#include <array>
#include <atomic>
#include <mutex>
#include <vector>

namespace kernel_pytorch {

// Set by the profiler layer (core.h says how they are used).
activity::Hooks activity::hooks{};
std::atomic<bool> activity::recording_flag{false};

namespace {

constexpr int kStreamsPerDevice = 1 + 2 * kStreamPoolSize;

struct DeviceStreams {
  std::once_flag created;
  std::array<kpdrStream_t, kStreamsPerDevice> handles{};
  // Per stream: submissions so far, and how many of them a sync has covered.
  std::array<std::atomic<uint64_t>, kStreamsPerDevice> submitted{};
  std::array<std::atomic<uint64_t>, kStreamsPerDevice> completed{};
  std::atomic<uint32_t> next_normal{0};
  std::atomic<uint32_t> next_high{0};
};

std::vector<DeviceStreams>& all_streams() {
  // Sized once at first use; leaked so no destructor races the runtime's.
  static auto* v = new std::vector<DeviceStreams>(device_count());
  return *v;
}

DeviceStreams& streams_of(c10::DeviceIndex device) {
  check_device_index(device);
  auto& ds = all_streams()[device];
  std::call_once(ds.created, [&] {
    const auto& api = rt();
    for (int id = 0; id < kStreamsPerDevice; ++id) {
      const int priority = id > kStreamPoolSize ? -1 : 0;
      KPDR_CHECK(api.StreamCreate(device, priority, &ds.handles[id]));
    }
  });
  return ds;
}

thread_local std::vector<c10::StreamId> t_current;

c10::StreamId& current_id(c10::DeviceIndex device) {
  if (C10_UNLIKELY(t_current.size() <= static_cast<size_t>(device))) {
    t_current.resize(device + 1, 0);
  }
  return t_current[device];
}

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

} // namespace

kpdrStream_t native_stream(const c10::Stream& stream) {
  const auto id = stream.id();
  TORCH_CHECK(
      id >= 0 && id < kStreamsPerDevice, "my_asic: invalid stream id ", id,
      " (not created by kernel_pytorch)");
  return streams_of(stream.device_index()).handles[id];
}

c10::Stream default_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make_stream(device, 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make_stream(device, current_id(device));
}

c10::Stream exchange_current_stream(const c10::Stream& stream) {
  const auto device = stream.device_index();
  check_device_index(device);
  TORCH_CHECK(stream.id() >= 0 && stream.id() < kStreamsPerDevice, "my_asic: invalid stream id ", stream.id());
  auto& slot = current_id(device);
  auto previous = make_stream(device, slot);
  slot = stream.id();
  return previous;
}

c10::Stream stream_from_pool(c10::DeviceIndex device, int priority) {
  // As torch.cuda: 0 is normal, negative is higher; below the highest
  // priority a device has (-1 here) is clamped to it.
  TORCH_CHECK_VALUE(
      priority <= 0, "Expected my_asic stream priority to be less than or equal to 0, got ", priority,
      " (0 is normal priority, negative numbers are higher, as for torch.cuda.Stream).");
  auto& ds = streams_of(device);
  if (priority < 0) {
    const auto n = ds.next_high.fetch_add(1) % kStreamPoolSize;
    return make_stream(device, 1 + kStreamPoolSize + n);
  }
  const auto n = ds.next_normal.fetch_add(1) % kStreamPoolSize;
  return make_stream(device, 1 + n);
}

int stream_priority(const c10::Stream& stream) {
  return stream.id() > kStreamPoolSize ? -1 : 0;
}

namespace {

// Marks everything submitted up to `seen` as finished.
void note_completed(DeviceStreams& ds, c10::StreamId id, uint64_t seen) {
  uint64_t done = ds.completed[id].load(std::memory_order_relaxed);
  while (done < seen && !ds.completed[id].compare_exchange_weak(done, seen)) {
  }
}

} // namespace

void note_work_submitted(const c10::Stream& stream) {
  streams_of(stream.device_index()).submitted[stream.id()].fetch_add(1, std::memory_order_release);
  if (in_host_kernel()) {
    synchronize_stream(stream); // host code reads the result next (host kernel scope, core.h)
  }
}

void synchronize_stream(const c10::Stream& stream) {
  const auto id = stream.id();
  kpdrStream_t handle = native_stream(stream);
  auto& ds = streams_of(stream.device_index());
  const uint64_t seen = ds.submitted[id].load(std::memory_order_acquire);
  if (seen == ds.completed[id].load(std::memory_order_acquire)) {
    return; // nothing submitted since the last wait
  }
  KPDR_CHECK(rt().StreamSynchronize(handle));
  note_completed(ds, id, seen);
}

bool query_stream(const c10::Stream& stream) {
  const auto id = stream.id();
  kpdrStream_t handle = native_stream(stream);
  auto& ds = streams_of(stream.device_index());
  const uint64_t seen = ds.submitted[id].load(std::memory_order_acquire);
  if (seen == ds.completed[id].load(std::memory_order_acquire)) {
    return true;
  }
  const kpdrError_t err = rt().StreamQuery(handle);
  if (err == KPDR_ERROR_NOT_READY) {
    return false;
  }
  KPDR_CHECK(err);
  note_completed(ds, id, seen);
  return true;
}

void memcpy_async(void* dst, const void* src, size_t bytes, kpdrMemcpyKind kind, const c10::Stream& stream) {
  activity::StreamWork work(activity::memcpy_kind(kind), nullptr, bytes, stream);
  KPDR_CHECK(rt().MemcpyAsync(dst, src, bytes, kind, native_stream(stream)));
  work.submitted();
  note_work_submitted(stream);
}

void stream_wait_event(const c10::Stream& stream, kpdrEvent_t event) {
  KPDR_CHECK(rt().StreamWaitEvent(native_stream(stream), event));
  note_work_submitted(stream);
}

void wait_current_stream(c10::DeviceIndex device) {
  synchronize_stream(current_stream(device));
}

} // namespace kernel_pytorch
