#include "memory/testing/test_upstreams.hpp"

#include "common/error.hpp"
#include "memory/size_classes.hpp"

namespace gradcomm {
namespace memory {

namespace {
// Far from anything the process maps, and 2 MiB aligned like real segments.
constexpr uintptr_t kVirtualBase = uintptr_t{1} << 44;
// A gap after every allocation, so a block that ran past its segment would
// land in nobody's memory and the overlap checks of the tests would see it.
constexpr uintptr_t kGuardGap = 2 * kMiB;
}  // namespace

VirtualUpstream::VirtualUpstream(size_t capacity, gcommDevice_t device)
    : capacity_(capacity), device_(device), next_(kVirtualBase) {}

void* VirtualUpstream::allocate(size_t bytes) {
  ++allocate_calls_;
  require(bytes > 0, "virtual upstream: cannot allocate 0 bytes");
  if (bytes > capacity_ - live_bytes_ || live_bytes_ > capacity_)
    fail(gcommOutOfMemory, "virtual upstream: ", bytes, " bytes requested, ", capacity_ - live_bytes_, " of ",
         capacity_, " free");
  uintptr_t addr = next_;
  next_ += round_up(bytes, kRoundLarge) + kGuardGap;
  live_[addr] = bytes;
  live_bytes_ += bytes;
  return reinterpret_cast<void*>(addr);
}

void VirtualUpstream::deallocate(void* ptr, size_t bytes) noexcept {
  ++deallocate_calls_;
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end() || it->second != bytes) {
    ++bad_deallocations_;
    return;
  }
  live_bytes_ -= bytes;
  live_.erase(it);
}

bool VirtualUpstream::owns(const void* ptr, size_t bytes) const {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = live_.upper_bound(addr);
  if (it == live_.begin()) return false;
  --it;
  return addr >= it->first && addr - it->first <= it->second && bytes <= it->second - (addr - it->first);
}

std::optional<MemoryInfo> VirtualUpstream::memory_info() const noexcept {
  MemoryInfo info;
  info.total_bytes = capacity_;
  info.free_bytes = capacity_ > live_bytes_ ? capacity_ - live_bytes_ : 0;
  return info;
}

void FaultInjectingUpstream::fail_after(size_t successes, size_t failures) {
  armed_ = true;
  successes_left_ = successes;
  failures_left_ = failures;
}

void* FaultInjectingUpstream::allocate(size_t bytes) {
  if (armed_) {
    if (successes_left_ > 0) {
      --successes_left_;
    } else if (failures_left_ > 0) {
      --failures_left_;
      ++injected_;
      fail(gcommOutOfMemory, "injected upstream allocation failure (FaultInjectingUpstream)");
    }
  }
  return inner_.allocate(bytes);
}

}  // namespace memory
}  // namespace gradcomm
