// Out of memory: flush the cache and retry once; a clear message when that
// fails; the pool limit; the fault-injection hooks.
#include <string>

#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

using OomTest = AllocatorTest;

std::string oom_message(CachingAllocator& a, size_t bytes, gcommStream_t s) {
  try {
    a.allocate(bytes, s);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommOutOfMemory);
    return e.message();
  }
  ADD_FAILURE() << "allocate(" << bytes << ") did not fail";
  return "";
}

TEST_F(OomTest, CachedSegmentsAreFreedAndTheAllocationRetried) {
  upstream.set_capacity(64 * kMiB);
  void* a = alloc->allocate(40 * kMiB, s0);
  alloc->deallocate(a, s1);  // pending on s0, then tagged s1: the flush must wait for both
  void* b = alloc->allocate(50 * kMiB, s0);
  ASSERT_NE(b, nullptr);
  AllocatorStats st = stats();
  EXPECT_EQ(st.cache_flushes, 1u);
  EXPECT_EQ(st.ooms, 0u);
  EXPECT_EQ(st.upstream_frees, 1u);
  EXPECT_GE(events.synchronizations(), 1u);
  EXPECT_EQ(st.reserved_bytes.all().current, 50 * kMiB);
  alloc->deallocate(b, s0);
}

TEST_F(OomTest, MessageGivesBytesDeviceAllocatedReservedFreeAndTheKnob) {
  upstream.set_capacity(100 * kMiB);
  void* a = alloc->allocate(30 * kMiB, s0);
  std::string msg = oom_message(*alloc, 80 * kMiB, s0);
  for (const char* needle :
       {"out of memory", "83886080 bytes", "80.00 MiB", "on host", "31457280 bytes", "allocated", "reserved",
        "73400320 bytes", "free of 100.00 MiB", "virtual upstream", "Free memory held elsewhere"})
    EXPECT_NE(msg.find(needle), std::string::npos) << needle << " missing in: " << msg;
  AllocatorStats st = stats();
  EXPECT_EQ(st.ooms, 1u);
  EXPECT_EQ(st.allocated_blocks.all().current, 1u) << "the failure changed nothing that was allocated";
  EXPECT_EQ(st.malloc_calls, 2u);
  alloc->deallocate(a, s0);
}

TEST_F(OomTest, PoolLimitShrinksSegmentsThenNamesTheConfigField) {
  AllocatorOptions o;
  o.pool_limit = 24 * kMiB;
  make(o);
  void* a = alloc->allocate(19 * kMiB, s0);  // a 20 MiB segment
  // A second 20 MiB segment would pass the limit; one of just the block fits.
  void* b = alloc->allocate(3 * kMiB, s0);
  EXPECT_EQ(stats().reserved_bytes.all().current, 23 * kMiB);
  void* c = alloc->allocate(1000, s0);  // a 1024-byte segment instead of 2 MiB
  EXPECT_EQ(stats().reserved_bytes.all().current, 23 * kMiB + 1024);
  std::string msg = oom_message(*alloc, 5 * kMiB, s0);
  EXPECT_NE(msg.find("raise gcommAllocatorConfig_t.pool_limit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("24.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the pool limit"), std::string::npos) << msg;
  for (void* p : {a, b, c}) alloc->deallocate(p, s0);
}

TEST_F(OomTest, UpstreamFailingOnceIsAbsorbedByTheRetry) {
  FaultInjectingUpstream faulty(upstream);
  CachingAllocator a(faulty, events);
  faulty.fail_after(0, 1);
  void* p = a.allocate(4096, s0);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(faulty.injected_failures(), 1u);
  EXPECT_EQ(a.stats().cache_flushes, 1u);
  a.deallocate(p, s0);
}

TEST_F(OomTest, UpstreamFailingTwiceIsAnOutOfMemoryError) {
  FaultInjectingUpstream faulty(upstream);
  CachingAllocator a(faulty, events);
  void* keep = a.allocate(4096, s0);
  faulty.fail_after(0, 2);
  std::string msg = oom_message(a, 4 * kMiB, s0);
  EXPECT_NE(msg.find("injected upstream allocation failure"), std::string::npos) << msg;
  EXPECT_EQ(a.stats().ooms, 1u);
  void* cached = a.allocate(4096, s0);
  EXPECT_NE(cached, nullptr) << "served from the cache, no upstream call";
  a.release_cached();
  a.deallocate(keep, s0);
  a.deallocate(cached, s0);
}

TEST_F(OomTest, InjectedFailureHitsTheChosenAllocationOnce) {
  alloc->inject_failure_after(2);
  void* a = alloc->allocate(100, s0);
  void* b = alloc->allocate(100, s0);
  std::string msg = oom_message(*alloc, 100, s0);
  EXPECT_NE(msg.find("injected allocation failure"), std::string::npos) << msg;
  void* c = alloc->allocate(100, s0);  // one-shot
  EXPECT_EQ(alloc->allocate_calls(), 4u);
  EXPECT_EQ(stats().allocated_blocks.all().current, 3u);
  alloc->inject_failure_after(0);
  alloc->clear_injected_failure();
  void* d = alloc->allocate(100, s0);
  for (void* p : {a, b, c, d}) alloc->deallocate(p, s0);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
