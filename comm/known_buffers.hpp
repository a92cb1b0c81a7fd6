// The device allocations a communicator's calls have already shown to be usable,
// so that a buffer inside one of them is not asked about again. Asking the driver
// where a buffer lives cost 0.1–0.2 µs per buffer on an H100 (bench/results/
// 2026-11-27-h100-323d9ae), one or two per call, on calls of 5 µs; training loops
// pass the same few allocations (a caching allocator's segments, the reducer's
// buckets) call after call. NCCL asks nothing (NCCL_CHECK_POINTERS=0 by default);
// gradcomm asks once per allocation.
//
// What this gives up: an allocation freed and its addresses handed to memory of
// another GPU or kind (rare: CUDA reuses a freed range for device memory of the
// same GPU first) passes unasked. GRADCOMM_CHECK_POINTERS=1 asks on every call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gradcomm::comm {

class KnownBuffers {
 public:
  static constexpr size_t kCapacity = 16;  // allocations remembered, most recently used first

  // Whether bytes [ptr, ptr + bytes) lie inside one remembered allocation; a hit
  // moves it to the front.
  bool covers(const void* ptr, size_t bytes) noexcept;
  // Remembers allocation [begin, end) (ignored when empty); past kCapacity the
  // least recently used is forgotten.
  void add(uintptr_t begin, uintptr_t end) noexcept;
  size_t size() const noexcept { return count_; }
  void clear() noexcept { count_ = 0; }

 private:
  struct Range {
    uintptr_t begin, end;
  };
  std::array<Range, kCapacity> ranges_{};
  size_t count_ = 0;
};

}  // namespace gradcomm::comm
