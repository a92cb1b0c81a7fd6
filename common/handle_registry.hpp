// Live-handle registry for the C API's opaque handles. A handle that was
// destroyed (or never created) is refused with a clear message instead of being
// dereferenced: "use after destroy" is detected, not undefined.
#pragma once

#include <mutex>
#include <unordered_set>

#include "common/error.hpp"

namespace gradcomm {

template <class T>
class HandleRegistry {
 public:
  explicit HandleRegistry(const char* type_name) : type_name_(type_name) {}

  void add(T* object) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(object);
  }
  // Removes and returns the object, or throws if it is not live.
  T* remove(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(static_cast<T*>(const_cast<void*>(handle)));
    if (it == live_.end()) fail_unknown(handle);
    T* object = *it;
    live_.erase(it);
    return object;
  }
  // The live object behind a handle, or throws gcommInvalidArgument.
  T* get(const void* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(static_cast<T*>(const_cast<void*>(handle)));
    if (it == live_.end()) fail_unknown(handle);
    return *it;
  }
  bool contains(const void* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(static_cast<T*>(const_cast<void*>(handle))) != 0;
  }

 private:
  [[noreturn]] void fail_unknown(const void* handle) const {
    if (handle == nullptr) fail(gcommInvalidArgument, "the ", type_name_, " handle is NULL");
    fail(gcommInvalidArgument, "handle ", handle, " is not a live ", type_name_,
         " (already destroyed, or never created)");
  }

  const char* type_name_;
  mutable std::mutex mutex_;
  std::unordered_set<T*> live_;
};

}  // namespace gradcomm
