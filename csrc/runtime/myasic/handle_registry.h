// Maps opaque C handles (kpdrStream_t, kpdrEvent_t) to live objects, so a
// stale or foreign handle is reported as KPDR_ERROR_INVALID_HANDLE instead of
// being dereferenced.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace myasic {

template <typename Object, typename Handle>
class HandleRegistry {
 public:
  // The handle is the object's address: unique while it is registered.
  Handle add(std::shared_ptr<Object> object) {
    Handle handle = reinterpret_cast<Handle>(object.get());
    std::lock_guard<std::mutex> lock(mutex_);
    objects_.emplace(handle, std::move(object));
    return handle;
  }

  // Shared ownership keeps the object alive for the caller even if another
  // thread removes the handle concurrently.
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
    objects.reserve(objects_.size());
    for (const auto& entry : objects_) objects.push_back(entry.second);
    return objects;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<Handle, std::shared_ptr<Object>> objects_;  // guarded by mutex_
};

}  // namespace myasic
