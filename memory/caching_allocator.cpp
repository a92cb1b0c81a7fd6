// The caching allocator's entry points: allocate, deallocate, record_stream and
// the cache-wide operations. Pool mechanics live in pool.cpp, the out-of-memory
// message in oom.cpp.
//
// Failure discipline: every operation first does everything that can throw
// (validation, event records, node and map allocations), then changes the pools
// with code that cannot fail, so a failed call leaves the cache as it was.
#include "memory/caching_allocator.hpp"

#include <algorithm>

#include "common/device.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm {
namespace memory {

void validate_options(const AllocatorOptions& options) {
  require(options.pool_limit > 0, "pool_limit 0 leaves no memory to allocate; use GCOMM_ALLOCATOR_UNLIMITED ",
          "for no limit");
  require(options.max_split_size >= kLargeBuffer, "max_split_size ", options.max_split_size,
          " is below the large-pool segment size ", kLargeBuffer,
          " (20 MiB); use at least that, or GCOMM_ALLOCATOR_UNLIMITED");
}

CachingAllocator::CachingAllocator(std::unique_ptr<Upstream> upstream, std::unique_ptr<EventSource> events,
                                   AllocatorOptions options)
    : owned_upstream_(std::move(upstream)),
      owned_events_(std::move(events)),
      upstream_(*owned_upstream_),
      events_(*owned_events_),
      options_(options),
      device_(upstream_.device()) {
  validate_options(options_);
  spare_blocks_.reserve(256);
  spare_live_nodes_.reserve(256);
}

CachingAllocator::CachingAllocator(Upstream& upstream, EventSource& events, AllocatorOptions options)
    : upstream_(upstream), events_(events), options_(options), device_(upstream.device()) {
  validate_options(options_);
  spare_blocks_.reserve(256);
  spare_live_nodes_.reserve(256);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    // An allocator that never got memory touches no device on its way out.
    if (!segments_.empty()) {
      DeviceGuard guard(device_);
      drain();
    }
  } catch (const std::exception& e) {
    GCOMM_WARN("allocator on ", describe_device(device_),
               ": waiting for streams at destroy failed: ", e.what(), "; releasing its memory anyway");
  }
  if (!live_.empty()) {
    GCOMM_WARN("allocator on ", describe_device(device_), " destroyed with ", live_.size(),
               " blocks still allocated (", stats_.allocated_bytes.all().current,
               " bytes); their memory is released and the pointers are now invalid");
  }
  for (Block* b : pending_)
    for (Event e : b->events) events_.release(e);
  for (auto& kv : streams_)
    if (kv.second.sweep != 0) events_.release(kv.second.sweep);
  while (!segments_.empty()) release_segment(segments_.begin()->second);
  for (Block* b : spare_blocks_) delete b;
}

void* CachingAllocator::allocate(size_t bytes, gcommStream_t stream) {
  if (bytes == 0) return nullptr;
  require(bytes <= kMaxRequest, "bytes ", bytes, " is too large: rounding it to a block size would overflow ",
          "(at most ", kMaxRequest, ")");
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceGuard guard(device_);
  ++allocate_calls_;
  ++stats_.malloc_calls;
  if (fault_armed_) {
    if (fault_countdown_ == 0) {
      fault_armed_ = false;
      ++stats_.ooms;
      fail(gcommOutOfMemory, "injected allocation failure of ", bytes,
           " bytes (CachingAllocator::inject_failure_after test hook)");
    }
    --fault_countdown_;
  }
  process_events(false);

  const size_t rounded = round_size(bytes);
  const bool small = is_small(rounded);
  FreePool& pool = pool_for(small);
  const StreamKey key = key_of(stream);
  Block* block = find_free(pool, key, rounded);
  if (block == nullptr && sweep_for(pool, key, rounded)) block = find_free(pool, key, rounded);
  const bool hit = block != nullptr;
  if (!hit) block = new_segment(bytes, rounded, small);  // a free kAnyStream block, in the pool

  // Everything that can throw, before the pool changes.
  Block* remainder = should_split(block->size, rounded, options_.max_split_size) ? take_block() : nullptr;
  try {
    if (spare_live_nodes_.empty()) {
      live_.emplace(block->addr, block);
    } else {
      LiveMap::node_type& node = spare_live_nodes_.back();
      node.key() = block->addr;
      node.mapped() = block;
      live_.insert(std::move(node));  // may rehash (and throw) but keeps the node on failure
      spare_live_nodes_.pop_back();
    }
  } catch (...) {
    if (remainder != nullptr) recycle(remainder);
    throw;
  }

  block->node = pool.extract(block);
  if (remainder != nullptr) {
    remainder->addr = block->addr + rounded;
    remainder->size = block->size - rounded;
    remainder->segment = block->segment;
    remainder->prev = block;
    remainder->next = block->next;
    if (block->next != nullptr) block->next->prev = remainder;
    block->next = remainder;
    block->size = rounded;
    remainder->state = BlockState::kFree;
    remainder->tag = block->tag;
    remainder->free_seq = block->free_seq;
    remainder->node.value() = remainder;
    pool.insert(std::move(remainder->node));
  }
  block->state = BlockState::kAllocated;
  block->requested = bytes;
  block->alloc_stream = stream;
  block->uses.clear();
  if (hit) ++stats_.cache_hits;
  stats_.allocated_bytes.increase(small, block->size);
  stats_.requested_bytes.increase(small, bytes);
  stats_.allocated_blocks.increase(small, 1);
  stats_.active_blocks.increase(small, 1);
  return reinterpret_cast<void*>(block->addr);
}

void CachingAllocator::deallocate(void* ptr, gcommStream_t stream) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end()) fail_not_held(ptr, "free");
  DeviceGuard guard(device_);
  Block* block = it->second;
  const bool small = block->segment->small;

  // The streams whose uses are not ordered before the free point on `stream`.
  std::vector<gcommStream_t> others;
  if (block->alloc_stream != stream) others.push_back(block->alloc_stream);
  for (gcommStream_t s : block->uses)
    if (s != stream && std::find(others.begin(), others.end(), s) == others.end()) others.push_back(s);
  stream_state(key_of(stream));  // mark_free needs it and must not fail
  std::vector<Event> recorded;
  if (!others.empty()) {
    if (pending_.size() == pending_.capacity()) pending_.reserve(2 * pending_.size() + 8);
    recorded.reserve(others.size());
    try {
      for (gcommStream_t s : others) recorded.push_back(events_.record(s));
    } catch (...) {
      for (Event e : recorded) events_.release(e);
      throw;
    }
  }

  if (spare_live_nodes_.size() < spare_live_nodes_.capacity()) {
    spare_live_nodes_.push_back(live_.extract(it));
  } else {
    live_.erase(it);
  }
  ++stats_.free_calls;
  stats_.allocated_bytes.decrease(small, block->size);
  stats_.requested_bytes.decrease(small, block->requested);
  stats_.allocated_blocks.decrease(small, 1);
  block->alloc_stream = stream;  // the stream that may reuse it once the events complete
  if (recorded.empty()) {
    stats_.active_blocks.decrease(small, 1);
    mark_free(block, key_of(stream));
    trim();
    return;
  }
  stats_.events_recorded += recorded.size();
  block->state = BlockState::kPending;
  block->events = std::move(recorded);
  pending_.push_back(block);
}

CachingAllocator::StreamState& CachingAllocator::stream_state(StreamKey stream) {
  if (stream != cached_stream_) {
    cached_state_ = &streams_[stream];
    cached_stream_ = stream;
  }
  return *cached_state_;
}

void CachingAllocator::record_stream(void* ptr, gcommStream_t stream) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end()) fail_not_held(ptr, "record_stream");
  Block* block = it->second;
  if (stream == block->alloc_stream) return;
  if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end())
    block->uses.push_back(stream);
}

void CachingAllocator::fail_not_held(void* ptr, const char* what) const {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  auto seg = segments_.upper_bound(addr);
  if (seg != segments_.begin()) {
    --seg;
    Segment* s = seg->second;
    if (addr < s->base + s->size) {
      for (Block* b = s->first; b != nullptr; b = b->next) {
        if (addr == b->addr)
          fail(gcommInvalidArgument, what, " of ", ptr,
               ": the block was already freed (double free, or use after free)");
        if (addr > b->addr && addr < b->addr + b->size)
          fail(gcommInvalidArgument, what, " of ", ptr, ": it points ", addr - b->addr,
               " bytes into a block at ", reinterpret_cast<void*>(b->addr),
               "; pass the pointer the allocator returned");
      }
    }
  }
  fail(gcommInvalidArgument, what, " of ", ptr, ": the pointer was not allocated by this allocator (",
       describe_device(device_), ", ", upstream_.kind_name(), ")");
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.cache_flushes;
  if (segments_.empty()) return;  // nothing cached: touch no device
  DeviceGuard guard(device_);
  drain();
  release_free_segments(false, 0);
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.reset_peaks();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string CachingAllocator::summary() const {
  SummaryContext context{describe_device(device_), upstream_.kind_name(), options_.pool_limit,
                         options_.release_threshold, options_.max_split_size};
  return format_summary(stats(), context);
}

size_t CachingAllocator::live_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.size();
}

size_t CachingAllocator::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.allocated_bytes.all().current;
}

void CachingAllocator::inject_failure_after(uint64_t successes) {
  std::lock_guard<std::mutex> lock(mutex_);
  fault_armed_ = true;
  fault_countdown_ = successes;
}

void CachingAllocator::clear_injected_failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  fault_armed_ = false;
}

uint64_t CachingAllocator::allocate_calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocate_calls_;
}

}  // namespace memory
}  // namespace gradcomm
