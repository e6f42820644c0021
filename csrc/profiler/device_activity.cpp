#include "device_activity.h"

#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <exception>
#include <mutex>
#include <optional>

#include <sys/syscall.h>
#include <unistd.h>


// Timing stream work with runtime events. kpdrEventElapsedTime measures
// between two completed events (float milliseconds), so each event is turned
// into a host time through an "anchor": an event whose host time is known. An
// event recorded on a stream with nothing pending completes as it is recorded,
// so its host time is the time of the kpdrEventRecord call; such events are
// anchors. Any other event is timed from the latest anchor of its device
// (recorded before it, so never later than it); the session's first anchors
// are events recorded right after a device synchronisation at start. Anchors
// are usually a few operations away, which keeps the float's rounding far
// below a microsecond.

namespace kernel_pytorch::activity {

namespace {

thread_local std::vector<uint64_t> t_correlation;

uint64_t current_correlation() {
  return t_correlation.empty() ? 0 : t_correlation.back();
}

// The system thread id, as Kineto labels the host rows of a trace.
int32_t thread_id() {
  static thread_local const int32_t id = static_cast<int32_t>(::syscall(SYS_gettid));
  return id;
}

struct Anchor {
  kpdrEvent_t event = nullptr;
  int64_t host_ns = 0;
};

// A record while the session runs.
struct Pending {
  Record record;
  bool host_timed = false;
  bool completed = false; // stream work: the end event was recorded
  kpdrStream_t native = nullptr;
  kpdrEvent_t start_event = nullptr;
  kpdrEvent_t end_event = nullptr;
  // Host time of start_event when it was recorded on an idle stream (an
  // anchor), else -1 and `anchor` says what to time it from.
  int64_t start_exact_ns = -1;
  std::optional<Anchor> anchor; // nullopt: no anchor (the record is dropped)
};

struct Session {
  std::mutex mutex;
  std::atomic<uint64_t> generation{0}; // bumped at every start and stop
  std::vector<Pending> pending;
  std::vector<std::optional<Anchor>> latest_anchor; // per device
  std::vector<kpdrEvent_t> start_anchors; // destroyed at stop
  std::vector<std::vector<kpdrEvent_t>> free_events; // per device, reused across sessions
  std::vector<std::string> errors;
};

Session& session() {
  // Leaked: recording hooks may run during static destruction.
  static auto* s = new Session();
  return *s;
}

void note_error(Session& s, const std::string& what) {
  // Caller holds s.mutex. A few distinct messages are enough.
  if (s.errors.size() < 8) {
    s.errors.push_back(what);
  }
}

kpdrEvent_t take_event(Session& s, c10::DeviceIndex device) {
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (static_cast<size_t>(device) < s.free_events.size() && !s.free_events[device].empty()) {
      kpdrEvent_t e = s.free_events[device].back();
      s.free_events[device].pop_back();
      return e;
    }
  }
  kpdrEvent_t e = nullptr;
  KPDR_CHECK(rt().EventCreate(device, KPDR_EVENT_DEFAULT, &e));
  return e;
}

void give_back(Session& s, c10::DeviceIndex device, kpdrEvent_t event) {
  // Caller holds s.mutex.
  if (event == nullptr) {
    return;
  }
  if (s.free_events.size() <= static_cast<size_t>(device)) {
    s.free_events.resize(device + 1);
  }
  s.free_events[device].push_back(event);
}

// Nanoseconds from `from` to `to` (both completed).
std::optional<int64_t> elapsed_ns(kpdrEvent_t from, kpdrEvent_t to) {
  float ms = 0.0f;
  if (rt().EventElapsedTime(&ms, from, to) != KPDR_SUCCESS || !std::isfinite(ms)) {
    return std::nullopt;
  }
  return std::max<int64_t>(0, std::llround(static_cast<double>(ms) * 1e6));
}

} // namespace

void push_correlation(uint64_t id) {
  t_correlation.push_back(id);
}

void pop_correlation() {
  if (!t_correlation.empty()) {
    t_correlation.pop_back();
  }
}

void start() {
  auto& s = session();
  std::vector<std::optional<Anchor>> anchors;
  std::vector<kpdrEvent_t> anchor_events;
  // Devices in use get an anchor after draining their work. A runtime not yet
  // initialised has nothing pending: its first work is on idle streams and
  // anchors itself.
  if (runtime_initialized()) {
    const auto& api = rt();
    const c10::DeviceIndex count = device_count();
    anchors.resize(count);
    for (c10::DeviceIndex d = 0; d < count; ++d) {
      KPDR_CHECK(api.DeviceSynchronize(d));
      kpdrEvent_t e = nullptr;
      KPDR_CHECK(api.EventCreate(d, KPDR_EVENT_DEFAULT, &e));
      anchor_events.push_back(e);
      const int64_t now = c10::getTime();
      KPDR_CHECK(api.EventRecord(e, native_stream(default_stream(d))));
      anchors[d] = Anchor{e, now};
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  TORCH_CHECK(!recording_flag.load(), "my_asic: a profiling session is already recording device activity");
  ++s.generation;
  s.pending.clear();
  s.errors.clear();
  s.latest_anchor = std::move(anchors);
  s.start_anchors = std::move(anchor_events);
  recording_flag.store(true, std::memory_order_release);
}

std::vector<Record> stop(std::vector<std::string>* errors) {
  auto& s = session();
  std::vector<Pending> pending;
  std::vector<kpdrEvent_t> start_anchors;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    recording_flag.store(false, std::memory_order_release);
    ++s.generation;
    pending.swap(s.pending);
    start_anchors.swap(s.start_anchors);
    s.latest_anchor.clear();
  }
  std::vector<Record> out;
  std::vector<std::string> problems;
  auto report = [&](const std::string& what) {
    if (problems.size() < 8) {
      problems.push_back(what);
    }
  };
  if (!pending.empty() || !start_anchors.empty()) {
    try {
      // The recorded work must be done before its events can be read.
      for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
        KPDR_CHECK(rt().DeviceSynchronize(d));
      }
    } catch (const std::exception& e) {
      report(std::string("cannot wait for the device: ") + e.what());
    }
  }
  out.reserve(pending.size());
  size_t dropped = 0;
  for (auto& p : pending) {
    if (p.host_timed) {
      out.push_back(std::move(p.record));
      continue;
    }
    if (!p.completed) {
      continue; // the submission failed; nothing ran
    }
    std::optional<int64_t> start;
    if (p.start_exact_ns >= 0) {
      start = p.start_exact_ns;
    } else if (p.anchor) {
      if (auto offset = elapsed_ns(p.anchor->event, p.start_event)) {
        start = p.anchor->host_ns + *offset;
      }
    }
    const auto duration = elapsed_ns(p.start_event, p.end_event);
    if (!start || !duration) {
      ++dropped;
      continue;
    }
    p.record.start_ns = *start;
    p.record.end_ns = *start + *duration;
    out.push_back(std::move(p.record));
  }
  if (dropped > 0) {
    report(std::to_string(dropped) + " my_asic activities could not be timed (kpdrEventElapsedTime failed)");
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& p : pending) {
      give_back(s, p.record.device, p.start_event);
      give_back(s, p.record.device, p.end_event);
    }
    for (const auto& e : s.errors) {
      report(e);
    }
    s.errors.clear();
  }
  for (kpdrEvent_t e : start_anchors) {
    rt().EventDestroy(e);
  }
  if (errors != nullptr) {
    *errors = std::move(problems);
  }
  return out;
}

// The hooks core calls while recording() (core/core.h).
namespace {

void stream_begin(StreamWork& w, Kind kind, const char* name, uint64_t bytes, const c10::Stream& stream) {
  auto& s = session();
  const c10::DeviceIndex device = stream.device_index();
  const int64_t submit_start = c10::getTime();
  kpdrEvent_t start_event = nullptr;
  kpdrEvent_t end_event = nullptr;
  kpdrStream_t native = nullptr;
  bool idle = false;
  int64_t recorded_at = 0;
  try {
    start_event = take_event(s, device);
    end_event = take_event(s, device);
    native = native_stream(stream);
    idle = query_stream(stream);
    recorded_at = c10::getTime();
    KPDR_CHECK(rt().EventRecord(start_event, native));
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(s.mutex);
    note_error(s, std::string("cannot record a device event: ") + e.what());
    give_back(s, device, start_event);
    give_back(s, device, end_event);
    return;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!recording_flag.load(std::memory_order_relaxed)) {
    give_back(s, device, start_event);
    give_back(s, device, end_event);
    return;
  }
  if (s.latest_anchor.size() <= static_cast<size_t>(device)) {
    s.latest_anchor.resize(device + 1);
  }
  Pending p;
  p.record = Record{kind, device, stream.id(), name ? name : "", bytes, current_correlation(), thread_id(),
                    submit_start, 0, 0, 0};
  p.native = native;
  p.start_event = start_event;
  p.end_event = end_event;
  if (idle) {
    p.start_exact_ns = recorded_at;
    s.latest_anchor[device] = Anchor{start_event, recorded_at};
  } else {
    p.anchor = s.latest_anchor[device];
  }
  w.slot = static_cast<int64_t>(s.pending.size());
  w.generation = s.generation;
  s.pending.push_back(std::move(p));
}

void stream_end(StreamWork& w) {
  auto& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  const size_t index = static_cast<size_t>(w.slot);
  w.slot = -1;
  if (w.generation != s.generation || index >= s.pending.size()) {
    return; // the session stopped meanwhile
  }
  auto& p = s.pending[index];
  // Recorded under the lock: stop() cannot take the record in between.
  if (rt().EventRecord(p.end_event, p.native) != KPDR_SUCCESS) {
    note_error(s, "cannot record a device event after a submission");
    return;
  }
  p.record.submit_end_ns = c10::getTime();
  p.completed = true;
}

void host_begin(HostWork& w, Kind kind, uint64_t bytes, const c10::Stream& stream, int64_t submitted_ns) {
  w.active = true;
  w.kind = kind;
  w.bytes = bytes;
  w.device = stream.device_index();
  w.stream = stream.id();
  w.correlation = current_correlation();
  w.generation = session().generation.load(std::memory_order_relaxed);
  w.start_ns = c10::getTime();
  w.submitted_ns = submitted_ns >= 0 ? std::min(submitted_ns, w.start_ns) : w.start_ns;
}

void host_end(HostWork& w) {
  w.active = false;
  const int64_t end = c10::getTime();
  if (std::uncaught_exceptions() > 0) {
    return; // the kernel raised: it did not run to completion
  }
  auto& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!recording_flag.load(std::memory_order_relaxed) || w.generation != s.generation) {
    return;
  }
  Pending p;
  p.host_timed = true;
  p.record = Record{w.kind, w.device, w.stream, "", w.bytes, w.correlation, thread_id(), w.submitted_ns,
                    w.start_ns, w.start_ns, end};
  s.pending.push_back(std::move(p));
}

// Installed as the extension loads, before any device work can start.
const bool kHooksInstalled = [] {
  hooks = Hooks{&stream_begin, &stream_end, &host_begin, &host_end};
  return true;
}();

} // namespace

} // namespace kernel_pytorch::activity
