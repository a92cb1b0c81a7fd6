// Bad input gets a clear error and changes nothing.
#include <cstring>
#include <string>

#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

class BadInputTest : public AllocatorTest {
 protected:
  // Runs f, which must throw gcommInvalidArgument with `needle` in its
  // message, and checks that the statistics did not move.
  template <class F>
  void expect_refused(F f, const char* needle) {
    AllocatorStats before = stats();
    try {
      f();
      ADD_FAILURE() << "not refused: " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), gcommInvalidArgument) << e.message();
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
    }
    AllocatorStats after = stats();
    EXPECT_EQ(0, std::memcmp(&before, &after, sizeof(before))) << "statistics changed";
  }
};

TEST_F(BadInputTest, ZeroBytesIsNullAndChangesNothing) {
  AllocatorStats before = stats();
  EXPECT_EQ(alloc->allocate(0, s0), nullptr);
  alloc->deallocate(nullptr, s0);
  alloc->record_stream(nullptr, s1);
  AllocatorStats after = stats();
  EXPECT_EQ(0, std::memcmp(&before, &after, sizeof(before)));
  EXPECT_EQ(upstream.allocate_calls(), 0u);
}

TEST_F(BadInputTest, SizesThatOverflowWhenRoundedAreRefused) {
  expect_refused([&] { alloc->allocate(SIZE_MAX, s0); }, "too large");
  expect_refused([&] { alloc->allocate(SIZE_MAX - 100, s0); }, "overflow");
  expect_refused([&] { alloc->allocate(kMaxRequest + 1, s0); }, "too large");
}

TEST_F(BadInputTest, HugeButRoundableSizesAreOutOfMemory) {
  try {
    alloc->allocate(kMaxRequest, s0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommOutOfMemory);
  }
}

TEST_F(BadInputTest, DoubleFreeIsRefused) {
  void* p = alloc->allocate(1000, s0);
  void* keep = alloc->allocate(1000, s0);
  alloc->deallocate(p, s0);
  expect_refused([&] { alloc->deallocate(p, s0); }, "double free");
  expect_refused([&] { alloc->record_stream(p, s1); }, "double free");
  alloc->deallocate(keep, s0);
}

TEST_F(BadInputTest, DoubleFreeOfAPendingBlockIsRefused) {
  void* p = alloc->allocate(1000, s0);
  alloc->record_stream(p, s1);
  alloc->deallocate(p, s0);
  expect_refused([&] { alloc->deallocate(p, s0); }, "double free");
}

TEST_F(BadInputTest, PointersNotOwnedAreRefused) {
  int local = 0;
  expect_refused([&] { alloc->deallocate(&local, s0); }, "not allocated by this allocator");
  void* p = alloc->allocate(4096, s0);
  expect_refused([&] { alloc->deallocate(static_cast<char*>(p) + 16, s0); }, "16 bytes into a block");
  expect_refused([&] { alloc->record_stream(static_cast<char*>(p) + 1, s1); }, "1 bytes into a block");
  // Another allocator's pointer.
  auto other = make_caching_allocator(gcommHostDevice(), gcommMemoryHost, AllocatorOptions{});
  void* q = other->allocate(4096, s0);
  expect_refused([&] { alloc->deallocate(q, s0); }, "not allocated by this allocator");
  other->deallocate(q, s0);
  alloc->deallocate(p, s0);
}

TEST_F(BadInputTest, OptionsOutOfRangeAreRefused) {
  AllocatorOptions o;
  o.pool_limit = 0;
  EXPECT_THROW({ CachingAllocator a(upstream, events, o); }, Error);
  o = AllocatorOptions{};
  o.max_split_size = kMiB;
  try {
    CachingAllocator a(upstream, events, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("max_split_size"), std::string::npos) << e.message();
  }
}

TEST_F(BadInputTest, DestroyWithLiveBlocksReleasesEverything) {
  // The C++ object frees all; the C API refuses instead (allocator_api_test).
  alloc->allocate(3 * kMiB, s0);
  alloc->allocate(100, s1);
  alloc.reset();
  EXPECT_EQ(upstream.live_allocations(), 0u);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
