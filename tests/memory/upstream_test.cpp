// The test doubles' own behaviour (virtual memory, fault injection), the event
// sources that run on the host, and the real host allocator (actual memory,
// written to). What every upstream must do is upstream_contract_test.cpp's.
#include <cstring>

#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

TEST(VirtualUpstream, CountsChecksAndRunsOutAtItsCapacity) {
  VirtualUpstream up(10 * kMiB);
  void* a = up.allocate(4 * kMiB);
  void* b = up.allocate(4 * kMiB);
  EXPECT_THROW(up.allocate(4 * kMiB), Error);
  EXPECT_TRUE(up.owns(a, 4 * kMiB));
  EXPECT_FALSE(up.owns(a, 4 * kMiB + 1));
  EXPECT_EQ(up.memory_info()->free_bytes, 2 * kMiB);
  up.deallocate(a, 1);  // wrong size
  EXPECT_EQ(up.bad_deallocations(), 1u);
  up.deallocate(a, 4 * kMiB);
  up.deallocate(b, 4 * kMiB);
  EXPECT_EQ(up.live_allocations(), 0u);
  EXPECT_EQ(up.allocate_calls(), 3u);
}

TEST(FaultInjectingUpstream, FailsTheChosenCalls) {
  VirtualUpstream inner;
  FaultInjectingUpstream up(inner);
  up.fail_after(1, 2);
  void* a = up.allocate(512);
  EXPECT_THROW(up.allocate(512), Error);
  EXPECT_THROW(up.allocate(512), Error);
  void* b = up.allocate(512);
  EXPECT_EQ(up.injected_failures(), 2u);
  up.deallocate(a, 512);
  up.deallocate(b, 512);
  EXPECT_EQ(inner.live_allocations(), 0u);
}

TEST(Events, ImmediateEventsAreCompleteAtOnce) {
  ImmediateEvents ev;
  Event e = ev.record(nullptr);
  EXPECT_NE(e, 0u);
  EXPECT_TRUE(ev.query(e));
  ev.release(e);
}

TEST(Events, ManualEventsCompleteByStream) {
  ManualEventSource ev;
  gcommStream_t a = stream_token(1), b = stream_token(2);
  Event ea = ev.record(a), eb = ev.record(b);
  EXPECT_FALSE(ev.query(ea));
  ev.complete_stream(a);
  EXPECT_TRUE(ev.query(ea));
  EXPECT_FALSE(ev.query(eb));
  EXPECT_EQ(ev.last_completed_on(a), ea);
  ev.synchronize(eb);
  EXPECT_TRUE(ev.query(eb));
  ev.release(ea);
  ev.release(eb);
  EXPECT_EQ(ev.outstanding(), 0u);
}

TEST(HostAllocator, RealMemoryIsWritableAndReused) {
  auto a = make_caching_allocator(gcommHostDevice(), gcommMemoryDefault, AllocatorOptions{});
  EXPECT_EQ(a->device().kind, gcommDeviceHost);
  gcommStream_t s = stream_token(7), t = stream_token(8);
  char* p = static_cast<char*>(a->allocate(10000, s));
  std::memset(p, 1, 10000);
  a->record_stream(p, t);
  a->deallocate(p, s);
  // Host events complete at once: the next malloc on any stream may take it.
  char* q = static_cast<char*>(a->allocate(10000, t));
  EXPECT_EQ(q, p);
  std::memset(q, 2, 10000);
  a->deallocate(q, t);
  a->release_cached();
  EXPECT_EQ(a->stats().reserved_bytes.all().current, 0u);
}

TEST(HostAllocator, CudaKindsNeedACudaDevice) {
  EXPECT_THROW(make_caching_allocator(gcommHostDevice(), gcommMemoryDevice, AllocatorOptions{}), Error);
  EXPECT_THROW(make_caching_allocator(gcommHostDevice(), gcommMemoryPinnedHost, AllocatorOptions{}), Error);
  EXPECT_THROW(
      make_caching_allocator(gcommHostDevice(), static_cast<gcommMemoryKind_t>(9), AllocatorOptions{}),
      Error);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
