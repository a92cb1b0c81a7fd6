// Stream ordering of the caching allocator: pending frees, sweeps, and waiting
// for every stream.
//
// Cross-stream reuse. A block freed on stream T is tagged T: T may reuse it at
// once (its later work is ordered after the free). Another stream may take it
// only once the block is tagged kAnyStream, which happens when a "sweep" event,
// recorded on T after the free, completes. Sweeps are recorded lazily: only when
// a request on another stream misses and a T-tagged block could serve it, one
// event per stream covering all its frees so far. A free on T of a block also
// used on other streams (the allocating stream, record_stream) waits, pending,
// for an event on each of them before it is tagged T.
#include <algorithm>

#include "memory/caching_allocator.hpp"

namespace gradcomm {
namespace memory {

bool CachingAllocator::process_events(bool wait) {
  if (pending_.empty() && sweeps_in_flight_ == 0) return false;
  bool changed = false;
  for (size_t i = 0; i < pending_.size();) {
    Block* b = pending_[i];
    while (!b->events.empty()) {
      Event e = b->events.back();
      if (wait) {
        events_.synchronize(e);
      } else if (!events_.query(e)) {
        break;
      }
      events_.release(e);
      b->events.pop_back();
    }
    if (!b->events.empty()) {
      ++i;
      continue;
    }
    pending_[i] = pending_.back();
    pending_.pop_back();
    stats_.active_blocks.decrease(b->segment->small, 1);
    mark_free(b, key_of(b->alloc_stream));
    changed = true;
  }
  if (sweeps_in_flight_ > 0) {
    for (auto& kv : streams_) {
      StreamState& st = kv.second;
      if (st.sweep == 0) continue;
      if (wait) {
        events_.synchronize(st.sweep);
      } else if (!events_.query(st.sweep)) {
        continue;
      }
      events_.release(st.sweep);
      st.sweep = 0;
      --sweeps_in_flight_;
      st.covered_seq = std::max(st.covered_seq, st.sweep_seq);
      migrate(kv.first, st.sweep_seq);
      changed = true;
    }
  }
  if (changed) trim();
  return changed;
}

void CachingAllocator::record_sweep(StreamKey stream) {
  StreamState& st = streams_.at(stream);
  st.sweep = events_.record(reinterpret_cast<gcommStream_t>(stream));
  st.sweep_seq = free_seq_;
  ++sweeps_in_flight_;
  ++stats_.events_recorded;
}

bool CachingAllocator::sweep_for(FreePool& pool, StreamKey stream, size_t rounded) {
  for (auto& kv : streams_) {
    const StreamState& st = kv.second;
    if (kv.first == stream || st.sweep != 0 || st.last_free_seq <= st.covered_seq) continue;
    auto it = pool.lower_bound(PoolKey{kv.first, rounded, 0});
    if (it == pool.end() || (*it)->tag != kv.first) continue;  // nothing of that stream would fit
    record_sweep(kv.first);
  }
  if (sweeps_in_flight_ == 0) return false;
  return process_events(false);
}

// Blocks of `stream` freed before the sweep was recorded become kAnyStream.
// insert_free may merge a block with its kAnyStream neighbours and recycle them;
// one of those can be the element right after the stream's range in the pool, so
// no iterator is kept across it: the scan resumes from the migrated block's old key.
void CachingAllocator::migrate(StreamKey stream, uint64_t covered) noexcept {
  for (FreePool* pool : {&small_pool_, &large_pool_}) {
    auto it = pool->lower_bound(PoolKey{stream, 0, 0});
    while (it != pool->end() && (*it)->tag == stream) {
      Block* b = *it;
      if (b->free_seq > covered) {
        ++it;
        continue;
      }
      const PoolKey after{stream, b->size, b->addr + 1};
      b->node = pool->extract(it);
      b->tag = kAnyStream;
      b->free_seq = 0;
      insert_free(b);
      it = pool->lower_bound(after);
    }
  }
}

void CachingAllocator::drain() {
  process_events(true);
  for (auto& kv : streams_) {
    const StreamState& st = kv.second;
    if (st.sweep == 0 && st.last_free_seq > st.covered_seq) record_sweep(kv.first);
  }
  process_events(true);
}

}  // namespace memory
}  // namespace gradcomm
