// A caching allocator over the virtual upstream and manual events: the whole
// cache logic on the host, with memory that costs nothing and streams that
// advance only when a test says so.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "common/error.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/testing/manual_event_source.hpp"
#include "memory/testing/test_upstreams.hpp"

namespace gradcomm {
namespace memory {

inline gcommStream_t stream_token(uintptr_t n) {
  return reinterpret_cast<gcommStream_t>(n);
}

class AllocatorTest : public ::testing::Test {
 protected:
  void make(AllocatorOptions options = {}) {
    alloc.reset();
    alloc = std::make_unique<CachingAllocator>(upstream, events, options);
  }
  void SetUp() override { make(); }
  void TearDown() override {
    alloc.reset();
    EXPECT_EQ(upstream.live_allocations(), 0u) << "segments leaked";
    EXPECT_EQ(upstream.bad_deallocations(), 0u);
    EXPECT_EQ(events.outstanding(), 0u) << "events leaked";
  }
  uintptr_t addr(void* p) const { return reinterpret_cast<uintptr_t>(p); }
  AllocatorStats stats() const { return alloc->stats(); }

  const gcommStream_t s0 = stream_token(0x100);
  const gcommStream_t s1 = stream_token(0x200);
  const gcommStream_t s2 = stream_token(0x300);
  VirtualUpstream upstream;
  ManualEventSource events;
  std::unique_ptr<CachingAllocator> alloc;
};

}  // namespace memory
}  // namespace gradcomm
