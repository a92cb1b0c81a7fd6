// Test-only upstreams.
//
// VirtualUpstream hands out addresses from a virtual range and never touches
// memory, so tests and benchmarks can allocate hundreds of MiB for free. It
// checks every deallocate against what it handed out and can pretend to be a
// device of a given capacity (to exercise out-of-memory).
//
// FaultInjectingUpstream wraps another upstream and fails chosen allocate calls
// with gcommOutOfMemory, to test the flush-and-retry path and callers' error
// handling.
#pragma once

#include <cstdint>
#include <map>

#include "memory/upstream/upstream.hpp"

namespace gradcomm {
namespace memory {

class VirtualUpstream final : public Upstream {
 public:
  explicit VirtualUpstream(size_t capacity = SIZE_MAX / 4, gcommDevice_t device = gcommHostDevice());
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override;
  gcommDevice_t device() const noexcept override { return device_; }
  const char* kind_name() const noexcept override { return "virtual memory"; }
  std::optional<MemoryInfo> memory_info() const noexcept override;

  size_t live_bytes() const { return live_bytes_; }
  // True if [ptr, ptr + bytes) lies inside one live allocation.
  bool owns(const void* ptr, size_t bytes) const;
  size_t live_allocations() const { return live_.size(); }
  size_t allocate_calls() const { return allocate_calls_; }
  size_t deallocate_calls() const { return deallocate_calls_; }
  // deallocate calls with an unknown pointer or a size that does not match.
  size_t bad_deallocations() const { return bad_deallocations_; }
  void set_capacity(size_t capacity) { capacity_ = capacity; }
  // Pretend deallocate waits for the device like cudaFree (default: no, the
  // conservative case, like pinned memory).
  void set_deallocate_waits(bool waits) { deallocate_waits_ = waits; }
  bool deallocate_waits_for_device() const noexcept override { return deallocate_waits_; }

 private:
  size_t capacity_;
  gcommDevice_t device_;
  uintptr_t next_;
  std::map<uintptr_t, size_t> live_;
  size_t live_bytes_ = 0;
  size_t allocate_calls_ = 0;
  size_t deallocate_calls_ = 0;
  size_t bad_deallocations_ = 0;
  bool deallocate_waits_ = false;
};

class FaultInjectingUpstream final : public Upstream {
 public:
  explicit FaultInjectingUpstream(Upstream& inner) : inner_(inner) {}
  // The next `successes` allocate calls succeed; the `failures` after them fail.
  void fail_after(size_t successes, size_t failures = SIZE_MAX);
  void disarm() { armed_ = false; }
  size_t injected_failures() const { return injected_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override { inner_.deallocate(ptr, bytes); }
  gcommDevice_t device() const noexcept override { return inner_.device(); }
  const char* kind_name() const noexcept override { return inner_.kind_name(); }
  std::optional<MemoryInfo> memory_info() const noexcept override { return inner_.memory_info(); }

 private:
  Upstream& inner_;
  bool armed_ = false;
  size_t successes_left_ = 0;
  size_t failures_left_ = 0;
  size_t injected_ = 0;
};

}  // namespace memory
}  // namespace gradcomm
