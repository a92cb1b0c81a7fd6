// Size classes of the caching allocator: how a request is rounded, which pool
// serves it, how big a segment is asked from the upstream, and when a free block
// is split. The constants follow PyTorch's CUDA caching allocator, whose numbers
// are tuned on real training workloads; docs/memory.md explains each one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace gradcomm {
namespace memory {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

// Every block is a multiple of this, so every block (at a 512-byte offset inside a
// 256-byte-aligned segment) is at least 256-byte aligned, like cudaMalloc.
constexpr size_t kMinBlockSize = 512;
// Requests up to this size go to the small pool; larger ones to the large pool.
// Keeping small blocks in their own segments stops them pinning large segments.
constexpr size_t kSmallSize = 1 * kMiB;
// Segment size of the small pool (one upstream call serves many small blocks).
constexpr size_t kSmallBuffer = 2 * kMiB;
// Segment size for large requests below kMinLargeAlloc: several such requests
// share one segment, which amortises upstream calls.
constexpr size_t kLargeBuffer = 20 * kMiB;
constexpr size_t kMinLargeAlloc = 10 * kMiB;
// Larger requests get a segment of their own, rounded to this.
constexpr size_t kRoundLarge = 2 * kMiB;

// The largest request that can be rounded without overflowing anything below
// (segment rounding included). Larger requests are refused as invalid.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;

// "No limit" for the config's size fields.
constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

constexpr size_t round_up(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// The block size that serves a request of `bytes` (bytes <= kMaxRequest).
constexpr size_t round_size(size_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : round_up(bytes, kMinBlockSize);
}

constexpr bool is_small(size_t rounded) {
  return rounded <= kSmallSize;
}

// How much to ask the upstream for when no cached block fits a rounded request.
constexpr size_t segment_size(size_t rounded) {
  if (is_small(rounded)) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

// Whether a free block of `block_size` taken for a rounded request of `rounded`
// bytes is cut in two. A small remainder is kept whole (it would only be dust);
// requests at or above max_split take whole blocks, so oversize blocks are never
// cut up and keep serving oversize requests.
constexpr bool should_split(size_t block_size, size_t rounded, size_t max_split) {
  size_t remaining = block_size - rounded;
  if (is_small(rounded)) return remaining >= kMinBlockSize;
  return rounded < max_split && remaining > kSmallSize;
}

// Whether a free block may serve a request at all under the max-split rule: a
// request below max_split never takes an oversize block (which would then be
// split into dust), and an oversize request takes an oversize block only if it
// wastes less than kLargeBuffer.
constexpr bool block_fits_max_split(size_t block_size, size_t rounded, size_t max_split) {
  if (rounded < max_split) return block_size < max_split;
  return block_size < rounded + kLargeBuffer;
}

}  // namespace memory
}  // namespace gradcomm
