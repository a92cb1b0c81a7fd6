// Live-handle registry for the C API's opaque handles. A handle that was
// destroyed (or never created) is refused with a clear message instead of being
// dereferenced: "use after destroy" is detected, not undefined.
//
// A handle is its object's address, so a new object at a freed object's address
// would make the old handle live again, silently naming the new object (a
// membership's next communicator took its predecessor's address at once). So
// destroy() keeps a destroyed object's memory in a quarantine of the last
// kQuarantine destroyed objects: an address comes back only after that many more
// objects of the type were destroyed.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <new>
#include <unordered_set>

#include "common/error.hpp"

namespace gradcomm {

// A handle object that the floors above hold while they use it (a reducer holds
// its communicator and scaler): its destroy is refused while users remain.
struct UseCounted {
  std::atomic<int> users{0};
};

template <class T>
class HandleRegistry {
 public:
  explicit HandleRegistry(const char* type_name) : type_name_(type_name) {}

  void add(T* object) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.insert(object);
  }
  static constexpr size_t kQuarantine = 256;

  ~HandleRegistry() {
    for (void* p : quarantine_) release_memory(p);
  }

  // Removes the object (throws if it is not live) and destroys it, outside the
  // lock (a destructor may wait for peers); its memory is quarantined (above).
  // The object must have been made with `new T`.
  void destroy(const void* handle) {
    T* object = remove(handle);
    object->~T();
    std::lock_guard<std::mutex> lock(mutex_);
    quarantine_.push_back(object);
    if (quarantine_.size() > kQuarantine) {
      release_memory(quarantine_.front());
      quarantine_.pop_front();
    }
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

  // For a T derived from UseCounted: counts a user of the live object.
  T& acquire(const void* handle) {
    T* object = get(handle);
    ++object->users;
    return *object;
  }
  // Undoes acquire; never throws (a handle already gone is ignored).
  void release(const void* handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(static_cast<T*>(const_cast<void*>(handle)));
    if (it != live_.end()) --(*it)->users;
  }
  // Before destroy: refuses while users remain ("the scaler is used by 1 reducer(s); ...").
  void refuse_if_used(const void* handle, const char* what) const {
    int users = get(handle)->users.load();
    if (users > 0)
      fail(gcommInvalidState, what, " is used by ", users,
           " reducer(s); destroy them first (gcommReducerDestroy)");
  }

 private:
  [[noreturn]] void fail_unknown(const void* handle) const {
    if (handle == nullptr) fail(gcommInvalidArgument, "the ", type_name_, " handle is NULL");
    fail(gcommInvalidArgument, "handle ", handle, " is not a live ", type_name_,
         " (already destroyed, or never created)");
  }

  static void release_memory(void* p) noexcept {
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete(p, std::align_val_t(alignof(T)));
    else
      ::operator delete(p);
  }

  const char* type_name_;
  mutable std::mutex mutex_;
  std::unordered_set<T*> live_;
  std::deque<void*> quarantine_;  // destroyed objects' memory, oldest first
};

}  // namespace gradcomm
