// The cache's bookkeeping: segments (one upstream allocation each), blocks (a
// contiguous piece of a segment, linked to its neighbours so frees can
// coalesce) and the free pools, ordered so that a best-fit lookup for one stream
// is a single lower_bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "gradcomm/types.h"
#include "memory/events/event_source.hpp"

namespace gradcomm {
namespace memory {

// Which stream may reuse a free block at once. Streams are pointers, so the
// all-ones value never names one; it marks blocks whose every use is known to
// be complete, which any stream may take.
using StreamKey = uintptr_t;
constexpr StreamKey kAnyStream = UINTPTR_MAX;
inline StreamKey key_of(gcommStream_t stream) {
  return reinterpret_cast<StreamKey>(stream);
}

enum class BlockState : uint8_t {
  kFree,       // in a free pool
  kAllocated,  // held by a caller
  kPending,    // freed, waiting for events on other streams before it can be reused
};

struct Block;

// Free pools are ordered by (tag, size, address): all blocks one stream may take
// are contiguous, smallest first, so the best fit is the first at or above a size.
struct PoolKey {
  StreamKey tag;
  size_t size;
  uintptr_t addr;
};
struct BlockLess {
  using is_transparent = void;
  static std::tuple<StreamKey, size_t, uintptr_t> key(const Block* b);
  static std::tuple<StreamKey, size_t, uintptr_t> key(const PoolKey& k) { return {k.tag, k.size, k.addr}; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return key(a) < key(b);
  }
};
using FreePool = std::set<Block*, BlockLess>;

struct Segment;

struct Block {
  uintptr_t addr = 0;
  size_t size = 0;
  Segment* segment = nullptr;
  Block* prev = nullptr;  // neighbours inside the segment, by address
  Block* next = nullptr;
  BlockState state = BlockState::kFree;
  // kFree: the stream that may reuse it at once (or kAnyStream), and the free
  // sequence number a sweep event must cover before the block turns kAnyStream.
  StreamKey tag = kAnyStream;
  uint64_t free_seq = 0;
  // kAllocated / kPending.
  size_t requested = 0;
  gcommStream_t alloc_stream = nullptr;
  std::vector<gcommStream_t> uses;  // streams named by record_stream, besides alloc_stream
  std::vector<Event> events;        // kPending: events still to complete
  // The set node this block lives in while free, owned by the block while it is
  // not: moving a block in and out of a pool never allocates, so freeing (which
  // must not fail half-way) never needs memory.
  FreePool::node_type node;
};

inline std::tuple<StreamKey, size_t, uintptr_t> BlockLess::key(const Block* b) {
  return {b->tag, b->size, b->addr};
}

struct Segment {
  uintptr_t base = 0;
  size_t size = 0;
  bool small = false;
  Block* first = nullptr;
  bool whole_free() const { return first->next == nullptr && first->state == BlockState::kFree; }
};

}  // namespace memory
}  // namespace gradcomm
