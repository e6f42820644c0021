// A simulated device event: which recording it currently stands for.
#pragma once

#include <memory>
#include <mutex>

#include "event_marker.h"
#include "kpdr.h"

namespace myasic {

class Event {
 public:
  Event(int device, unsigned int flags) : device_(device), flags_(flags) {}

  int device() const { return device_; }
  bool timing_enabled() const { return (flags_ & KPDR_EVENT_DISABLE_TIMING) == 0; }

  // Starts a new recording; the caller hands the marker to a stream.
  std::shared_ptr<EventMarker> begin_record();
  // The most recent recording, or nullptr if the event was never recorded.
  std::shared_ptr<EventMarker> latest_record() const;

 private:
  const int device_;
  const unsigned int flags_;
  mutable std::mutex mutex_;
  std::shared_ptr<EventMarker> latest_;  // guarded by mutex_
};

}  // namespace myasic
