// A stream-ordered caching allocator over any Upstream, with stream ordering
// delegated to an EventSource, so the whole logic runs (and is tested) on the
// host. Design, constants and contracts: docs/memory.md.
//
// Thread safety: every public method may be called concurrently; one mutex
// guards the state. Every method that may touch CUDA holds a DeviceGuard for
// the upstream's device (a no-op for host memory).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gradcomm/memory.h"
#include "memory/block.hpp"
#include "memory/events/event_source.hpp"
#include "memory/size_classes.hpp"
#include "memory/stats.hpp"
#include "memory/upstream/upstream.hpp"

namespace gradcomm {
namespace memory {

struct AllocatorOptions {
  uint64_t pool_limit = kUnlimited;
  uint64_t release_threshold = kUnlimited;
  uint64_t max_split_size = kUnlimited;
};

// Throws gcommInvalidArgument naming the field if an option is out of range.
void validate_options(const AllocatorOptions& options);

class CachingAllocator {
 public:
  // Owns its upstream and event source.
  CachingAllocator(std::unique_ptr<Upstream> upstream, std::unique_ptr<EventSource> events,
                   AllocatorOptions options = {});
  // Borrows them (tests keep the test doubles to drive them).
  CachingAllocator(Upstream& upstream, EventSource& events, AllocatorOptions options = {});
  // Waits for pending events, then gives every segment back. Blocks still
  // allocated are freed too, with a WARN giving their count and bytes.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // nullptr for 0 bytes. Throws gcommInvalidArgument for sizes that cannot be
  // rounded, gcommOutOfMemory (after a flush and one retry) when memory cannot be had.
  void* allocate(size_t bytes, gcommStream_t stream);
  // Throws gcommInvalidArgument, changing nothing, for a pointer not held
  // (with "double free" when it is a free block's start). nullptr is a no-op.
  void deallocate(void* ptr, gcommStream_t stream);
  void record_stream(void* ptr, gcommStream_t stream);
  // Waits for pending events, gives every wholly free segment back.
  void release_cached();
  void reset_peak_stats();

  AllocatorStats stats() const;
  std::string summary() const;
  gcommDevice_t device() const { return device_; }
  const AllocatorOptions& options() const { return options_; }
  // Blocks held by callers, and their bytes.
  size_t live_blocks() const;
  size_t live_bytes() const;

  // Test hook for fault injection at every allocation site of the layers above:
  // the next `successes` allocate() calls of more than 0 bytes behave normally,
  // the one after fails with gcommOutOfMemory, once. Count the sites first with
  // allocate_calls().
  void inject_failure_after(uint64_t successes);
  void clear_injected_failure();
  uint64_t allocate_calls() const;

 private:
  // Per stream: the newest free sequence number tagged with it, the newest one a
  // completed sweep covered, and the sweep in flight (event 0 if none).
  struct StreamState {
    uint64_t last_free_seq = 0;
    uint64_t covered_seq = 0;
    Event sweep = 0;
    uint64_t sweep_seq = 0;
  };

  FreePool& pool_for(bool small) { return small ? small_pool_ : large_pool_; }
  Block* find_free(FreePool& pool, StreamKey stream, size_t rounded) const;
  Block* new_segment(size_t bytes, size_t rounded, bool small);
  Block* try_upstream(size_t rounded, bool small, std::string& cause);
  [[noreturn]] void fail_oom(size_t bytes, size_t rounded, const std::string& cause);
  bool limit_blocks(size_t size) const;
  Block* take_block();
  void recycle(Block* block) noexcept;
  void mark_free(Block* block, StreamKey tag) noexcept;
  void insert_free(Block* block) noexcept;
  bool process_events(bool wait);
  bool sweep_for(FreePool& pool, StreamKey stream, size_t rounded);
  void record_sweep(StreamKey stream);
  StreamState& stream_state(StreamKey stream);  // creates it (may throw)
  void migrate(StreamKey stream, uint64_t covered) noexcept;
  void drain();
  size_t release_free_segments(bool only_confirmed, uint64_t down_to) noexcept;
  void release_segment(Segment* segment) noexcept;
  void trim();
  [[noreturn]] void fail_not_held(void* ptr, const char* what) const;

  std::unique_ptr<Upstream> owned_upstream_;
  std::unique_ptr<EventSource> owned_events_;
  Upstream& upstream_;
  EventSource& events_;
  const AllocatorOptions options_;
  const gcommDevice_t device_;

  mutable std::mutex mutex_;
  FreePool small_pool_;
  FreePool large_pool_;
  using LiveMap = std::unordered_map<uintptr_t, Block*>;
  LiveMap live_;
  // Nodes of live_ kept for reuse: a cached malloc/free pair then never calls
  // the system allocator (about a quarter of its time otherwise).
  std::vector<LiveMap::node_type> spare_live_nodes_;
  std::map<uintptr_t, Segment*> segments_;
  std::vector<Block*> pending_;
  std::unordered_map<StreamKey, StreamState> streams_;
  // One-entry cache of streams_ (its elements never move): most programs free
  // on one stream over and over.
  StreamKey cached_stream_ = kAnyStream;
  StreamState* cached_state_ = nullptr;
  std::vector<Block*> spare_blocks_;
  uint64_t free_seq_ = 0;
  size_t sweeps_in_flight_ = 0;
  AllocatorStats stats_;
  uint64_t allocate_calls_ = 0;
  bool fault_armed_ = false;
  uint64_t fault_countdown_ = 0;
};

// The upstream and event source for a memory kind on a device (validated by
// the caller): cudaMalloc/cudaHostAlloc with pooled CUDA events, or host memory
// with immediate events.
std::unique_ptr<CachingAllocator> make_caching_allocator(gcommDevice_t device, gcommMemoryKind_t kind,
                                                         const AllocatorOptions& options);

}  // namespace memory
}  // namespace gradcomm
