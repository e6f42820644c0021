#include "event.h"

namespace myasic {

std::shared_ptr<EventMarker> Event::begin_record() {
  auto marker = std::make_shared<EventMarker>();
  std::lock_guard<std::mutex> lock(mutex_);
  latest_ = marker;
  return marker;
}

std::shared_ptr<EventMarker> Event::latest_record() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

}  // namespace myasic
