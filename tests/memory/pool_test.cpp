// Pool logic on the virtual upstream: size classes, splitting, coalescing,
// best fit, max-split, release threshold, release-cached and statistics.
#include <string>
#include <vector>

#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

using PoolTest = AllocatorTest;

TEST_F(PoolTest, SmallRequestsSplitOneTwoMiBSegment) {
  void* p = alloc->allocate(100, s0);
  void* q = alloc->allocate(600, s0);
  EXPECT_EQ(addr(q), addr(p) + 512) << "the remainder of the first block serves the second";
  EXPECT_EQ(addr(p) % 256, 0u);
  AllocatorStats st = stats();
  EXPECT_EQ(upstream.allocate_calls(), 1u);
  EXPECT_EQ(st.reserved_bytes.all().current, 2 * kMiB);
  EXPECT_EQ(st.reserved_bytes.pool[kSmallPool].current, 2 * kMiB);
  EXPECT_EQ(st.allocated_bytes.all().current, 512u + 1024u);
  EXPECT_EQ(st.requested_bytes.all().current, 700u);
  EXPECT_EQ(st.allocated_blocks.all().current, 2u);
  EXPECT_EQ(st.segments.all().current, 1u);
  EXPECT_EQ(st.cache_hits, 1u);
  EXPECT_EQ(st.malloc_calls, 2u);
  alloc->deallocate(p, s0);
  alloc->deallocate(q, s0);
}

TEST_F(PoolTest, FreedNeighboursCoalesceBackIntoTheWholeSegment) {
  void* a = alloc->allocate(512, s0);
  void* b = alloc->allocate(512, s0);
  void* c = alloc->allocate(512, s0);
  alloc->deallocate(b, s0);
  alloc->deallocate(a, s0);
  // a and b merged: a 1024-byte request fits exactly where a was.
  void* ab = alloc->allocate(1024, s0);
  EXPECT_EQ(ab, a);
  alloc->deallocate(ab, s0);
  alloc->release_cached();
  EXPECT_EQ(stats().segments.all().current, 1u) << "c still holds the segment";
  alloc->deallocate(c, s0);
  alloc->release_cached();
  EXPECT_EQ(stats().segments.all().current, 0u) << "all blocks merged back into one";
  EXPECT_EQ(upstream.live_allocations(), 0u);
}

// Freeing in address order merges each block into its free predecessor and
// recycles it; past the spare list's capacity the recycled descriptors are
// deleted. The merge with the next neighbour must not read the deleted one
// (a use-after-free that ASan caught in CI under the thread test).
TEST_F(PoolTest, ManyMergesIntoThePreviousBlockPastTheSpareListCapacity) {
  constexpr int kBlocks = 1000;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(alloc->allocate(512, s0));
  for (int i = 1; i < kBlocks; ++i) {
    ASSERT_EQ(addr(blocks[i]), addr(blocks[i - 1]) + 512) << "one segment, split in order";
  }
  for (void* p : blocks) alloc->deallocate(p, s0);
  void* merged = alloc->allocate(kMiB, s0);  // the largest small request
  EXPECT_EQ(merged, blocks[0]) << "the freed blocks merged back at the segment's start";
  alloc->deallocate(merged, s0);
  alloc->release_cached();
  EXPECT_EQ(stats().segments.all().current, 0u) << "the segment is whole again, so released";
}

TEST_F(PoolTest, LargeRequestsShareTwentyMiBSegments) {
  void* a = alloc->allocate(2 * kMiB, s0);
  void* b = alloc->allocate(3 * kMiB, s0);
  EXPECT_EQ(addr(b), addr(a) + 2 * kMiB);
  EXPECT_EQ(upstream.allocate_calls(), 1u);
  EXPECT_EQ(stats().reserved_bytes.pool[kLargePool].current, 20 * kMiB);
  // Requests of 10 MiB and more get a segment of their own, rounded to 2 MiB.
  void* c = alloc->allocate(17 * kMiB, s0);  // more than the 15 MiB left
  EXPECT_EQ(stats().reserved_bytes.all().current, 20 * kMiB + 18 * kMiB);
  for (void* p : {a, b, c}) alloc->deallocate(p, s0);
}

TEST_F(PoolTest, LargeRemaindersOfAtMostOneMiBStayWithTheBlock) {
  void* p = alloc->allocate(19 * kMiB + 512 * kKiB, s0);  // segment 20 MiB, remainder 0.5 MiB
  EXPECT_EQ(stats().allocated_bytes.all().current, 20 * kMiB);
  EXPECT_EQ(stats().requested_bytes.all().current, 19 * kMiB + 512 * kKiB);
  alloc->deallocate(p, s0);
}

TEST_F(PoolTest, BestFitTakesTheSmallestBlockThatFits) {
  void* a = alloc->allocate(4 * kMiB, s0);
  void* spacer1 = alloc->allocate(2 * kMiB, s0);
  void* b = alloc->allocate(8 * kMiB, s0);
  void* spacer2 = alloc->allocate(2 * kMiB, s0);
  alloc->deallocate(b, s0);
  alloc->deallocate(a, s0);
  EXPECT_EQ(alloc->allocate(3 * kMiB, s0), a);
  EXPECT_EQ(alloc->allocate(6 * kMiB, s0), b);
  EXPECT_EQ(upstream.allocate_calls(), 1u);
  alloc->release_cached();
  for (void* p : {a, b, spacer1, spacer2}) alloc->deallocate(p, s0);
}

TEST_F(PoolTest, SmallRequestsNeverComeFromTheLargePool) {
  void* big = alloc->allocate(4 * kMiB, s0);
  alloc->deallocate(big, s0);
  void* small = alloc->allocate(1000, s0);
  EXPECT_EQ(upstream.allocate_calls(), 2u);
  EXPECT_EQ(stats().segments.pool[kSmallPool].current, 1u);
  alloc->deallocate(small, s0);
}

TEST_F(PoolTest, MaxSplitKeepsOversizeBlocksWhole) {
  AllocatorOptions o;
  o.max_split_size = 32 * kMiB;
  make(o);
  void* big = alloc->allocate(40 * kMiB, s0);
  alloc->deallocate(big, s0);
  // A request below max_split does not cut the oversize block.
  void* p = alloc->allocate(2 * kMiB, s0);
  EXPECT_NE(p, big);
  EXPECT_EQ(upstream.allocate_calls(), 2u);
  // An oversize request wasting less than 20 MiB takes it whole.
  void* q = alloc->allocate(35 * kMiB, s0);
  EXPECT_EQ(q, big);
  EXPECT_EQ(stats().allocated_bytes.all().current, 20 * kMiB + 40 * kMiB - 18 * kMiB)
      << "2 MiB from a 20 MiB segment, and the 40 MiB block unsplit";
  alloc->deallocate(q, s0);
  // A request below max_split still never takes it.
  void* r = alloc->allocate(20 * kMiB, s0);
  EXPECT_NE(r, big);
  for (void* x : {p, r}) alloc->deallocate(x, s0);
}

TEST_F(PoolTest, ReleaseCachedGivesBackOnlyWhollyFreeSegments) {
  void* a = alloc->allocate(4 * kMiB, s0);
  void* b = alloc->allocate(30 * kMiB, s0);
  alloc->deallocate(b, s0);
  alloc->release_cached();
  AllocatorStats st = stats();
  EXPECT_EQ(st.reserved_bytes.all().current, 20 * kMiB);
  EXPECT_EQ(st.allocated_bytes.all().current, 4 * kMiB);
  EXPECT_EQ(st.cache_flushes, 1u);
  EXPECT_EQ(st.upstream_frees, 1u);
  alloc->deallocate(a, s0);
}

TEST_F(PoolTest, ReleaseThresholdGivesBackAtFreeWhenTheUpstreamWaits) {
  upstream.set_deallocate_waits(true);  // like cudaFree
  AllocatorOptions o;
  o.release_threshold = 0;
  make(o);
  void* p = alloc->allocate(4 * kMiB, s0);
  alloc->deallocate(p, s0);
  EXPECT_EQ(stats().reserved_bytes.all().current, 0u);
  EXPECT_EQ(upstream.live_allocations(), 0u);
}

TEST_F(PoolTest, ReleaseThresholdWaitsForTheStreamOtherwise) {
  AllocatorOptions o;
  o.release_threshold = 0;
  make(o);
  void* p = alloc->allocate(4 * kMiB, s0);
  alloc->deallocate(p, s0);
  // The block may still be in use by work on s0: a sweep event is recorded,
  // nothing is given back yet.
  EXPECT_EQ(stats().reserved_bytes.all().current, 20 * kMiB);
  EXPECT_EQ(events.incomplete_on(s0), 1u);
  events.complete_stream(s0);
  void* q = alloc->allocate(512, s1);  // processes the event first, then trims
  EXPECT_EQ(stats().reserved_bytes.pool[kLargePool].current, 0u);
  alloc->deallocate(q, s1);
}

TEST_F(PoolTest, PeaksAndTotals) {
  void* a = alloc->allocate(3 * kMiB, s0);
  void* b = alloc->allocate(5 * kMiB, s0);
  alloc->deallocate(a, s0);
  AllocatorStats st = stats();
  EXPECT_EQ(st.allocated_bytes.all().peak, 8 * kMiB);
  EXPECT_EQ(st.allocated_bytes.all().current, 5 * kMiB);
  EXPECT_EQ(st.allocated_bytes.all().total_allocated, 8 * kMiB);
  EXPECT_EQ(st.allocated_bytes.all().total_freed, 3 * kMiB);
  alloc->reset_peak_stats();
  EXPECT_EQ(stats().allocated_bytes.all().peak, 5 * kMiB);
  EXPECT_EQ(stats().reserved_bytes.all().peak, 20 * kMiB);
  alloc->deallocate(b, s0);
}

TEST_F(PoolTest, SummaryReadsLikeTorchMemorySummary) {
  void* p = alloc->allocate(3 * kMiB, s0);
  std::string text = alloc->summary();
  for (const char* needle :
       {"gradcomm caching allocator: host, virtual memory", "Allocated memory", "from large pool",
        "from small pool", "Reserved memory", "Segments", "Cur Usage", "Peak Usage", "3.00 MiB", "20.00 MiB",
        "Cache hits", "Out-of-memory errors", "Pool limit", "unlimited"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  alloc->deallocate(p, s0);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
