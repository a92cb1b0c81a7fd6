// Statistics of a caching allocator. Kept per pool (aggregate, small, large) for
// the summary table; the C API exposes the aggregate.
#pragma once

#include <cstdint>
#include <string>

#include "gradcomm/memory.h"

namespace gradcomm {
namespace memory {

struct Stat {
  uint64_t current = 0;
  uint64_t peak = 0;
  uint64_t total_allocated = 0;
  uint64_t total_freed = 0;

  void increase(uint64_t n) {
    current += n;
    total_allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(uint64_t n) {
    current -= n;
    total_freed += n;
  }
  void reset_peak() { peak = current; }
};

enum PoolIndex : int { kAllPools = 0, kSmallPool = 1, kLargePool = 2, kNumPoolIndices = 3 };

// A per-pool statistic: [kAllPools] is the sum of the other two.
struct PoolStat {
  Stat pool[kNumPoolIndices];
  void increase(bool small, uint64_t n) {
    pool[kAllPools].increase(n);
    pool[small ? kSmallPool : kLargePool].increase(n);
  }
  void decrease(bool small, uint64_t n) {
    pool[kAllPools].decrease(n);
    pool[small ? kSmallPool : kLargePool].decrease(n);
  }
  void reset_peak() {
    for (Stat& s : pool) s.reset_peak();
  }
  const Stat& all() const { return pool[kAllPools]; }
};

struct AllocatorStats {
  PoolStat allocated_bytes;
  PoolStat requested_bytes;
  PoolStat reserved_bytes;
  PoolStat allocated_blocks;
  PoolStat active_blocks;
  PoolStat segments;
  uint64_t malloc_calls = 0;
  uint64_t free_calls = 0;
  uint64_t cache_hits = 0;
  uint64_t upstream_allocs = 0;
  uint64_t upstream_frees = 0;
  uint64_t ooms = 0;
  uint64_t cache_flushes = 0;
  uint64_t events_recorded = 0;

  void reset_peaks() {
    for (PoolStat* s :
         {&allocated_bytes, &requested_bytes, &reserved_bytes, &allocated_blocks, &active_blocks, &segments})
      s->reset_peak();
  }
};

// The aggregate statistics in the C API's layout (header fields left zero).
void to_c_stats(const AllocatorStats& in, gcommAllocatorStats_t* out);

// "1.50 MiB", "512 B", "unlimited" (for kUnlimited).
std::string format_bytes(uint64_t bytes);

// The settings shown in the summary and OOM messages.
struct SummaryContext {
  std::string device;  // "cuda:0"
  std::string kind;    // "device memory"
  uint64_t pool_limit;
  uint64_t release_threshold;
  uint64_t max_split_size;
};
// A table in the manner of torch.cuda.memory_summary().
std::string format_summary(const AllocatorStats& stats, const SummaryContext& context);

}  // namespace memory
}  // namespace gradcomm
