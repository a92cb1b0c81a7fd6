// Pool mechanics of the caching allocator: best-fit lookup, segments,
// coalescing and giving memory back. Stream ordering is in stream_order.cpp.
#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"
#include "memory/caching_allocator.hpp"

namespace gradcomm {
namespace memory {

Block* CachingAllocator::find_free(FreePool& pool, StreamKey stream, size_t rounded) const {
  Block* best = nullptr;
  for (StreamKey tag : {stream, kAnyStream}) {
    auto it = pool.lower_bound(PoolKey{tag, rounded, 0});
    if (it == pool.end() || (*it)->tag != tag) continue;
    Block* b = *it;
    // The smallest fitting block of this tag; if the max-split rule refuses it,
    // it refuses every larger one too.
    if (!block_fits_max_split(b->size, rounded, options_.max_split_size)) continue;
    if (best == nullptr || b->size < best->size) best = b;
  }
  return best;
}

Block* CachingAllocator::take_block() {
  Block* b = nullptr;
  if (!spare_blocks_.empty()) {
    b = spare_blocks_.back();
    spare_blocks_.pop_back();
  } else {
    b = new Block();
  }
  if (b->node.empty()) {
    try {
      FreePool scratch;
      scratch.insert(b);
      b->node = scratch.extract(scratch.begin());
    } catch (...) {
      delete b;
      throw;
    }
  }
  return b;
}

void CachingAllocator::recycle(Block* b) noexcept {
  b->prev = b->next = nullptr;
  b->segment = nullptr;
  b->uses.clear();
  b->events.clear();
  b->state = BlockState::kFree;
  if (spare_blocks_.size() < spare_blocks_.capacity()) {
    spare_blocks_.push_back(b);
  } else {
    delete b;
  }
}

// Puts a free block (not in a pool, owning its node) into its pool, first
// absorbing free neighbours it may merge with: those with its tag, and
// kAnyStream ones (safe for any stream, so safe for its). The merged block keeps
// the stricter tag and the newest free sequence number.
void CachingAllocator::insert_free(Block* b) noexcept {
  FreePool& pool = pool_for(b->segment->small);
  // The tag is read once: after a merge with the previous block, `b` is
  // recycled (possibly deleted) and the survivor carries the same tag.
  const StreamKey tag = b->tag;
  auto mergeable = [tag](const Block* n) {
    return n != nullptr && n->state == BlockState::kFree && (n->tag == tag || n->tag == kAnyStream);
  };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    p->node = pool.extract(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next != nullptr) b->next->prev = p;
    p->tag = b->tag;
    p->free_seq = std::max(p->free_seq, b->free_seq);
    recycle(b);
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    n->node = pool.extract(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    b->free_seq = std::max(b->free_seq, n->free_seq);
    recycle(n);
  }
  b->node.value() = b;
  pool.insert(std::move(b->node));
}

void CachingAllocator::mark_free(Block* b, StreamKey tag) noexcept {
  b->state = BlockState::kFree;
  b->tag = tag;
  b->free_seq = 0;
  b->uses.clear();
  if (tag != kAnyStream) {
    b->free_seq = ++free_seq_;
    // The state exists: deallocate created it before changing anything.
    if (tag == cached_stream_) {
      cached_state_->last_free_seq = b->free_seq;
    } else {
      auto it = streams_.find(tag);
      if (it != streams_.end()) it->second.last_free_seq = b->free_seq;
    }
  }
  insert_free(b);
}

bool CachingAllocator::limit_blocks(size_t size) const {
  const uint64_t reserved = stats_.reserved_bytes.all().current;
  return reserved > options_.pool_limit || size > options_.pool_limit - reserved;
}

Block* CachingAllocator::try_upstream(size_t rounded, bool small, std::string& cause) {
  size_t size = segment_size(rounded);
  // Under a pool limit, a smaller segment that still fits beats an OOM.
  if (limit_blocks(size)) size = rounded;
  if (limit_blocks(size)) {
    cause = cat("the pool limit (", format_bytes(options_.pool_limit), ") would be exceeded");
    return nullptr;
  }
  Block* b = take_block();
  auto segment = std::make_unique<Segment>();
  void* ptr = nullptr;
  try {
    ptr = upstream_.allocate(size);
  } catch (const Error& e) {
    recycle(b);
    if (e.status() != gcommOutOfMemory) throw;
    cause = e.message();
    return nullptr;
  } catch (...) {
    recycle(b);
    throw;
  }
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  try {
    segments_.emplace(addr, segment.get());
  } catch (...) {
    upstream_.deallocate(ptr, size);
    recycle(b);
    throw;
  }
  Segment* s = segment.release();
  s->base = addr;
  s->size = size;
  s->small = small;
  s->first = b;
  b->addr = addr;
  b->size = size;
  b->segment = s;
  b->state = BlockState::kFree;
  b->tag = kAnyStream;  // fresh memory: no stream has used it
  b->free_seq = 0;
  b->node.value() = b;
  pool_for(small).insert(std::move(b->node));
  ++stats_.upstream_allocs;
  stats_.reserved_bytes.increase(small, size);
  stats_.segments.increase(small, 1);
  return b;
}

Block* CachingAllocator::new_segment(size_t bytes, size_t rounded, bool small) {
  std::string cause;
  if (Block* b = try_upstream(rounded, small, cause)) return b;
  // Out of memory: wait for every stream still holding cached blocks, give
  // all wholly free segments back, and try once more.
  GCOMM_INFO(ALLOC, "allocator on ", device_.kind == gcommDeviceHost ? "host" : "cuda", ": ", cause,
             "; emptying the cache and retrying");
  drain();
  release_free_segments(false, 0);
  ++stats_.cache_flushes;
  if (Block* b = try_upstream(rounded, small, cause)) return b;
  fail_oom(bytes, rounded, cause);
}

size_t CachingAllocator::release_free_segments(bool only_confirmed, uint64_t down_to) noexcept {
  size_t released = 0;
  const bool any_tag = !only_confirmed || upstream_.deallocate_waits_for_device();
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (stats_.reserved_bytes.all().current <= down_to) break;
    Segment* s = it->second;
    ++it;
    if (!s->whole_free() || (!any_tag && s->first->tag != kAnyStream)) continue;
    release_segment(s);
    ++released;
  }
  return released;
}

void CachingAllocator::release_segment(Segment* s) noexcept {
  for (Block* b = s->first; b != nullptr;) {
    Block* next = b->next;
    if (b->state == BlockState::kFree) {
      pool_for(s->small).erase(b);
    } else if (b->state == BlockState::kAllocated) {
      live_.erase(b->addr);
    } else {
      pending_.erase(std::remove(pending_.begin(), pending_.end(), b), pending_.end());
    }
    delete b;
    b = next;
  }
  segments_.erase(s->base);
  upstream_.deallocate(reinterpret_cast<void*>(s->base), s->size);
  ++stats_.upstream_frees;
  stats_.reserved_bytes.decrease(s->small, s->size);
  stats_.segments.decrease(s->small, 1);
  delete s;
}

// Keeps reserved bytes under the release threshold without waiting for any
// stream. Segments still tagged with a stream need a sweep first (unless the
// upstream waits by itself); one is recorded so a later call can release them.
void CachingAllocator::trim() {
  if (options_.release_threshold == kUnlimited) return;
  if (stats_.reserved_bytes.all().current <= options_.release_threshold) return;
  release_free_segments(true, options_.release_threshold);
  if (stats_.reserved_bytes.all().current <= options_.release_threshold) return;
  if (upstream_.deallocate_waits_for_device()) return;
  try {
    for (auto& kv : streams_) {
      const StreamState& st = kv.second;
      if (st.sweep == 0 && st.last_free_seq > st.covered_seq) record_sweep(kv.first);
    }
  } catch (const std::exception& e) {
    GCOMM_WARN("allocator: recording a sweep event for the release threshold failed: ", e.what());
  }
}

}  // namespace memory
}  // namespace gradcomm
