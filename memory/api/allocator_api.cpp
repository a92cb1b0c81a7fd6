// C API of the memory layer. Validates every argument before touching the
// allocator; the allocator itself leaves its state unchanged when it throws.
#include <algorithm>
#include <cstring>

#include "common/api/out_string.hpp"
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/device.hpp"
#include "common/handle_registry.hpp"
#include "memory/api/allocator_handle.hpp"

using namespace gradcomm;
using gradcomm::memory::CachingAllocator;

namespace {

HandleRegistry<CachingAllocator>& registry() {
  static HandleRegistry<CachingAllocator> handles("gcommAllocator_t");
  return handles;
}

memory::AllocatorOptions options_from(const gcommAllocatorConfig_t& c) {
  require(c.kind >= gcommMemoryDefault && c.kind < gcommNumMemoryKinds,
          "gcommAllocatorConfig_t.kind: ", static_cast<int>(c.kind), " is not a gcommMemoryKind_t (0..",
          gcommNumMemoryKinds - 1, ")");
  memory::AllocatorOptions o;
  o.pool_limit = c.pool_limit;
  o.release_threshold = c.release_threshold;
  o.max_split_size = c.max_split_size;
  try {
    memory::validate_options(o);
  } catch (const Error& e) {
    fail(e.status(), "gcommAllocatorConfig_t.", e.message());
  }
  return o;
}

}  // namespace

namespace gradcomm {
namespace memory {
CachingAllocator& allocator_from_handle(gcommAllocator_t handle) {
  return *registry().get(handle);
}
}  // namespace memory
}  // namespace gradcomm

extern "C" {

GCOMM_API gcommStatus_t gcommAllocatorCreate(gcommDevice_t device, const gcommAllocatorConfig_t* config,
                                             gcommAllocator_t* allocator) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(allocator);
    const gcommAllocatorConfig_t defaults = GCOMM_ALLOCATOR_CONFIG_INITIALIZER;
    gcommAllocatorConfig_t c = read_config(config, defaults, "gcommAllocatorConfig_t");
    gcommDevice_t d = validate_device(device);
    memory::AllocatorOptions options = options_from(c);
    std::unique_ptr<CachingAllocator> a = memory::make_caching_allocator(d, c.kind, options);
    registry().add(a.get());
    *allocator = reinterpret_cast<gcommAllocator_t>(a.release());
  });
}

GCOMM_API gcommStatus_t gcommAllocatorDestroy(gcommAllocator_t allocator) {
  return GCOMM_API_CALL({
    CachingAllocator& a = memory::allocator_from_handle(allocator);
    size_t blocks = a.live_blocks();
    if (blocks != 0)
      fail(gcommInvalidState, "the allocator still has ", blocks, " blocks allocated (", a.live_bytes(),
           " bytes); free them with gcommAllocatorFree before destroying it");
    registry().destroy(allocator);
  });
}

GCOMM_API gcommStatus_t gcommAllocatorMalloc(gcommAllocator_t allocator, size_t bytes, gcommStream_t stream,
                                             void** ptr) {
  return GCOMM_API_CALL({
    CachingAllocator& a = memory::allocator_from_handle(allocator);
    GCOMM_REQUIRE_NOT_NULL(ptr);
    *ptr = a.allocate(bytes, stream);
  });
}

GCOMM_API gcommStatus_t gcommAllocatorFree(gcommAllocator_t allocator, void* ptr, gcommStream_t stream) {
  return GCOMM_API_CALL({ memory::allocator_from_handle(allocator).deallocate(ptr, stream); });
}

GCOMM_API gcommStatus_t gcommAllocatorRecordStream(gcommAllocator_t allocator, void* ptr,
                                                   gcommStream_t stream) {
  return GCOMM_API_CALL({ memory::allocator_from_handle(allocator).record_stream(ptr, stream); });
}

GCOMM_API gcommStatus_t gcommAllocatorGetStats(gcommAllocator_t allocator, gcommAllocatorStats_t* stats) {
  return GCOMM_API_CALL({
    CachingAllocator& a = memory::allocator_from_handle(allocator);
    GCOMM_REQUIRE_NOT_NULL(stats);
    gcommAllocatorStats_t out = GCOMM_ALLOCATOR_STATS_INITIALIZER;
    memory::to_c_stats(a.stats(), &out);
    write_versioned_out(out, stats, "gcommAllocatorStats_t", "GCOMM_ALLOCATOR_STATS_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommAllocatorGetSummary(gcommAllocator_t allocator, char* buffer, size_t size,
                                                 size_t* required) {
  return GCOMM_API_CALL({
    CachingAllocator& a = memory::allocator_from_handle(allocator);
    copy_out_string(a.summary(), buffer, size, required);
  });
}

GCOMM_API gcommStatus_t gcommAllocatorReleaseCached(gcommAllocator_t allocator) {
  return GCOMM_API_CALL({ memory::allocator_from_handle(allocator).release_cached(); });
}

GCOMM_API gcommStatus_t gcommAllocatorResetPeakStats(gcommAllocator_t allocator) {
  return GCOMM_API_CALL({ memory::allocator_from_handle(allocator).reset_peak_stats(); });
}

}  // extern "C"
