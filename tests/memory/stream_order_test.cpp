// Stream-ordered reuse with manual events: a freed block is reusable on its
// stream at once, on other streams only after an event shows every stream
// that used it has passed the free.
#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

using StreamOrderTest = AllocatorTest;

TEST_F(StreamOrderTest, SameStreamReusesAtOnceWithoutEvents) {
  void* p = alloc->allocate(4096, s0);
  alloc->deallocate(p, s0);
  EXPECT_EQ(alloc->allocate(4096, s0), p);
  EXPECT_EQ(events.recorded(), 0u) << "the single-stream path records no event";
  alloc->deallocate(p, s0);
}

TEST_F(StreamOrderTest, OtherStreamWaitsForASweepEvent) {
  // Two 1 MiB blocks fill a small segment, so nothing else can serve s1.
  void* p = alloc->allocate(kMiB, s0);
  void* keep = alloc->allocate(kMiB, s0);
  alloc->deallocate(p, s0);
  void* q = alloc->allocate(kMiB, s1);
  EXPECT_NE(q, p) << "s0 may still be using p";
  EXPECT_EQ(events.incomplete_on(s0), 1u) << "a sweep was recorded on s0";
  alloc->deallocate(q, s1);

  events.complete_stream(s0);
  void* r = alloc->allocate(kMiB, s2);
  EXPECT_EQ(r, p) << "once s0 passed the free, any stream may take p";
  alloc->deallocate(r, s2);
  alloc->deallocate(keep, s0);
}

TEST_F(StreamOrderTest, SweepCoversOnlyFreesBeforeIt) {
  const size_t k = 512 * kKiB;  // four of them fill a small segment
  void* a = alloc->allocate(k, s0);
  void* c = alloc->allocate(k, s0);
  void* b = alloc->allocate(k, s0);
  void* x = alloc->allocate(k, s0);
  alloc->deallocate(a, s0);
  void* d = alloc->allocate(k, s1);  // miss: a sweep on s0 covering a's free
  EXPECT_NE(d, a);
  alloc->deallocate(b, s0);  // after the sweep was recorded
  events.complete_stream(s0);
  void* e = alloc->allocate(k, s1);
  EXPECT_EQ(e, a) << "a's free was covered by the sweep";
  void* f = alloc->allocate(k, s1);
  EXPECT_NE(f, b) << "b was freed after the sweep: still s0's only";
  for (void* y : {d, e, f}) alloc->deallocate(y, s1);
  for (void* y : {c, x}) alloc->deallocate(y, s0);
}

TEST_F(StreamOrderTest, RecordStreamDefersTheFreeUntilEveryStreamPassed) {
  void* p = alloc->allocate(1 << 16, s0);
  alloc->record_stream(p, s1);
  alloc->record_stream(p, s2);
  alloc->record_stream(p, s1);  // twice: one event, not two
  alloc->record_stream(p, s0);  // the allocating stream: nothing to add
  alloc->deallocate(p, s0);
  EXPECT_EQ(events.incomplete_on(s1), 1u);
  EXPECT_EQ(events.incomplete_on(s2), 1u);
  EXPECT_EQ(events.incomplete_on(s0), 0u);
  AllocatorStats st = stats();
  EXPECT_EQ(st.allocated_blocks.all().current, 0u);
  EXPECT_EQ(st.allocated_bytes.all().current, 0u);
  EXPECT_EQ(st.active_blocks.all().current, 1u) << "pending blocks stay active";
  EXPECT_EQ(st.events_recorded, 2u);

  void* probe = alloc->allocate(1 << 16, s0);
  EXPECT_NE(probe, p) << "not even s0 may reuse it yet";
  events.complete_stream(s1);
  void* q = alloc->allocate(1 << 16, s0);
  EXPECT_NE(q, p) << "s2 has not passed yet";
  events.complete_stream(s2);
  void* r = alloc->allocate(1 << 16, s0);
  EXPECT_EQ(r, p) << "every stream passed: reusable on the freeing stream";
  EXPECT_EQ(stats().active_blocks.all().current, 3u);
  for (void* x : {probe, q, r}) alloc->deallocate(x, s0);
}

TEST_F(StreamOrderTest, FreeOnAnotherStreamWaitsForTheAllocatingStream) {
  void* p = alloc->allocate(4096, s0);
  void* keep = alloc->allocate(4096, s0);
  alloc->deallocate(p, s1);
  EXPECT_EQ(events.incomplete_on(s0), 1u);
  void* t = alloc->allocate(4096, s1);
  EXPECT_NE(t, p);
  events.complete_all();
  void* u = alloc->allocate(4096, s1);
  EXPECT_EQ(u, p);
  EXPECT_EQ(stats().allocated_blocks.all().current, 3u);
  alloc->deallocate(keep, s0);
  alloc->deallocate(t, s1);
  alloc->deallocate(u, s1);
}

TEST_F(StreamOrderTest, AFailedEventRecordLeavesTheBlockAllocated) {
  void* p = alloc->allocate(4096, s0);
  alloc->record_stream(p, s1);
  alloc->record_stream(p, s2);
  events.fail_records(true);
  EXPECT_THROW(alloc->deallocate(p, s0), Error);
  events.fail_records(false);
  EXPECT_EQ(stats().allocated_blocks.all().current, 1u);
  EXPECT_EQ(events.outstanding(), 0u);
  alloc->deallocate(p, s0);  // now it works
  EXPECT_EQ(stats().allocated_blocks.all().current, 0u);
}

TEST_F(StreamOrderTest, ReleaseCachedWaitsForPendingBlocksAndSweeps) {
  void* p = alloc->allocate(4096, s0);
  alloc->record_stream(p, s1);
  alloc->deallocate(p, s0);
  alloc->release_cached();
  EXPECT_GE(events.synchronizations(), 1u);
  EXPECT_EQ(stats().reserved_bytes.all().current, 0u);
  EXPECT_EQ(stats().active_blocks.all().current, 0u);
}

TEST_F(StreamOrderTest, DestroyWaitsForPendingEvents) {
  void* p = alloc->allocate(4096, s0);
  alloc->record_stream(p, s1);
  alloc->deallocate(p, s0);
  alloc.reset();
  EXPECT_EQ(events.outstanding(), 0u);
  EXPECT_EQ(upstream.live_allocations(), 0u);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
