// Opaque C handles (kpdrStream_t, kpdrEvent_t) -> live objects, so a stale or
// foreign handle is KPDR_ERROR_INVALID_HANDLE, never dereferenced.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kpdr_opencl {

template <typename Object, typename Handle>
class HandleRegistry {
 public:
  Handle add(std::shared_ptr<Object> object) {
    Handle handle = reinterpret_cast<Handle>(object.get());
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.emplace(handle, std::move(object));
    return handle;
  }
  std::shared_ptr<Object> find(Handle handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = objects_.find(handle);
    return it == objects_.end() ? nullptr : it->second;
  }
  std::shared_ptr<Object> remove(Handle handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = objects_.find(handle);
    if (it == objects_.end()) return nullptr;
    std::shared_ptr<Object> object = std::move(it->second);
    objects_.erase(it);
    return object;
  }
  std::vector<std::shared_ptr<Object>> snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::shared_ptr<Object>> objects;
    for (const auto& entry : objects_) objects.push_back(entry.second);
    return objects;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<Handle, std::shared_ptr<Object>> objects_;
};

}  // namespace kpdr_opencl
