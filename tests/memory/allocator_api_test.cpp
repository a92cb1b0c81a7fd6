// The allocator's C API through libgradcomm.so, as an embedder calls it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace {

std::string last() {
  return gcommGetLastError();
}
gcommStream_t token(uintptr_t n) {
  return reinterpret_cast<gcommStream_t>(n);
}

class AllocatorApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(gcommAllocatorCreate(gcommHostDevice(), nullptr, &a), gcommSuccess) << last();
  }
  void TearDown() override {
    if (a != nullptr) {
      EXPECT_EQ(gcommAllocatorDestroy(a), gcommSuccess) << last();
    }
  }
  gcommAllocatorStats_t stats() {
    gcommAllocatorStats_t s = GCOMM_ALLOCATOR_STATS_INITIALIZER;
    EXPECT_EQ(gcommAllocatorGetStats(a, &s), gcommSuccess) << last();
    return s;
  }
  gcommAllocator_t a = nullptr;
};

TEST_F(AllocatorApi, MallocFreeAndStatistics) {
  void* p = nullptr;
  ASSERT_EQ(gcommAllocatorMalloc(a, 1000, token(1), &p), gcommSuccess) << last();
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5A, 1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  gcommAllocatorStats_t s = stats();
  EXPECT_EQ(s.allocated_bytes.current, 1024u);
  EXPECT_EQ(s.requested_bytes.current, 1000u);
  EXPECT_EQ(s.reserved_bytes.current, 2u << 20);
  EXPECT_EQ(s.segments.current, 1u);
  EXPECT_EQ(s.upstream_allocs, 1u);
  EXPECT_EQ(s.size, sizeof(gcommAllocatorStats_t));
  EXPECT_EQ(s.magic, GCOMM_CONFIG_MAGIC);
  ASSERT_EQ(gcommAllocatorRecordStream(a, p, token(2)), gcommSuccess) << last();
  ASSERT_EQ(gcommAllocatorFree(a, p, token(1)), gcommSuccess) << last();
  void* q = nullptr;
  ASSERT_EQ(gcommAllocatorMalloc(a, 1000, token(1), &q), gcommSuccess);
  EXPECT_EQ(q, p) << "cached";
  ASSERT_EQ(gcommAllocatorFree(a, q, token(1)), gcommSuccess);
  s = stats();
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.allocated_bytes.peak, 1024u);
  ASSERT_EQ(gcommAllocatorResetPeakStats(a), gcommSuccess);
  EXPECT_EQ(stats().allocated_bytes.peak, 0u);
  ASSERT_EQ(gcommAllocatorReleaseCached(a), gcommSuccess);
  s = stats();
  EXPECT_EQ(s.reserved_bytes.current, 0u);
  EXPECT_EQ(s.upstream_frees, 1u);
  EXPECT_EQ(s.cache_flushes, 1u);
}

TEST_F(AllocatorApi, SummaryWithSizeQueryAndTruncation) {
  size_t required = 0;
  ASSERT_EQ(gcommAllocatorGetSummary(a, nullptr, 0, &required), gcommSuccess);
  ASSERT_GT(required, 100u);
  std::vector<char> buf(required);
  ASSERT_EQ(gcommAllocatorGetSummary(a, buf.data(), buf.size(), nullptr), gcommSuccess);
  std::string text(buf.data());
  EXPECT_EQ(text.size() + 1, required);
  EXPECT_NE(text.find("gradcomm caching allocator: host, host memory"), std::string::npos) << text;
  EXPECT_NE(text.find("Reserved memory"), std::string::npos) << text;
  char small[10];
  ASSERT_EQ(gcommAllocatorGetSummary(a, small, sizeof(small), nullptr), gcommSuccess);
  EXPECT_EQ(std::string(small), text.substr(0, 9));
  EXPECT_EQ(gcommAllocatorGetSummary(a, nullptr, 5, &required), gcommInvalidArgument);
}

TEST_F(AllocatorApi, ZeroBytesIsNullAndFreeOfNullIsANoOp) {
  void* p = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(gcommAllocatorMalloc(a, 0, nullptr, &p), gcommSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(gcommAllocatorFree(a, nullptr, nullptr), gcommSuccess);
  EXPECT_EQ(gcommAllocatorRecordStream(a, nullptr, nullptr), gcommSuccess);
  EXPECT_EQ(stats().malloc_calls, 0u);
}

TEST_F(AllocatorApi, BadArgumentsAreRefusedAndChangeNothing) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(gcommAllocatorMalloc(a, SIZE_MAX, nullptr, &p), gcommInvalidArgument);
  EXPECT_NE(last().find("gcommAllocatorMalloc"), std::string::npos) << last();
  EXPECT_NE(last().find("too large"), std::string::npos) << last();
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1)) << "out-pointer untouched";
  EXPECT_EQ(gcommAllocatorMalloc(a, 10, nullptr, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("'ptr'"), std::string::npos) << last();
  int local = 0;
  EXPECT_EQ(gcommAllocatorFree(a, &local, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("not allocated by this allocator"), std::string::npos) << last();
  void* q = nullptr;
  ASSERT_EQ(gcommAllocatorMalloc(a, 10, nullptr, &q), gcommSuccess);
  ASSERT_EQ(gcommAllocatorFree(a, q, nullptr), gcommSuccess);
  EXPECT_EQ(gcommAllocatorFree(a, q, nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("double free"), std::string::npos) << last();
  EXPECT_EQ(gcommAllocatorGetStats(a, nullptr), gcommInvalidArgument);
  gcommAllocatorStats_t raw;
  std::memset(&raw, 0, sizeof(raw));
  EXPECT_EQ(gcommAllocatorGetStats(a, &raw), gcommInvalidArgument);
  EXPECT_NE(last().find("GCOMM_ALLOCATOR_STATS_INITIALIZER"), std::string::npos) << last();
  gcommAllocatorStats_t s = stats();
  EXPECT_EQ(s.free_calls, 1u);
  EXPECT_EQ(s.allocated_blocks.current, 0u);
}

TEST_F(AllocatorApi, StatsFromAnOlderSmallerHeaderGetOnlyWhatTheyKnow) {
  void* p = nullptr;
  ASSERT_EQ(gcommAllocatorMalloc(a, 4096, nullptr, &p), gcommSuccess);
  gcommAllocatorStats_t s = GCOMM_ALLOCATOR_STATS_INITIALIZER;
  s.size = offsetof(gcommAllocatorStats_t, requested_bytes);  // knew allocated_bytes only
  s.reserved_bytes.current = 12345;
  ASSERT_EQ(gcommAllocatorGetStats(a, &s), gcommSuccess) << last();
  EXPECT_EQ(s.allocated_bytes.current, 4096u);
  EXPECT_EQ(s.reserved_bytes.current, 12345u) << "beyond the caller's size: untouched";
  ASSERT_EQ(gcommAllocatorFree(a, p, nullptr), gcommSuccess);
}

TEST_F(AllocatorApi, DestroyWithLiveBlocksIsRefusedAndTheAllocatorStaysUsable) {
  void* p = nullptr;
  void* q = nullptr;
  ASSERT_EQ(gcommAllocatorMalloc(a, 3 << 20, nullptr, &p), gcommSuccess);
  ASSERT_EQ(gcommAllocatorMalloc(a, 100, nullptr, &q), gcommSuccess);
  EXPECT_EQ(gcommAllocatorDestroy(a), gcommInvalidState);
  EXPECT_NE(last().find("2 blocks allocated (3146240 bytes)"), std::string::npos) << last();
  EXPECT_EQ(gcommAllocatorFree(a, p, nullptr), gcommSuccess) << last();
  EXPECT_EQ(gcommAllocatorFree(a, q, nullptr), gcommSuccess) << last();
}

TEST_F(AllocatorApi, UseAfterDestroyIsDetected) {
  gcommAllocator_t dead = a;
  ASSERT_EQ(gcommAllocatorDestroy(a), gcommSuccess);
  a = nullptr;
  void* p = nullptr;
  EXPECT_EQ(gcommAllocatorMalloc(dead, 10, nullptr, &p), gcommInvalidArgument);
  EXPECT_NE(last().find("not a live gcommAllocator_t"), std::string::npos) << last();
  EXPECT_EQ(gcommAllocatorFree(dead, p, nullptr), gcommInvalidArgument);
  EXPECT_EQ(gcommAllocatorRecordStream(dead, p, nullptr), gcommInvalidArgument);
  gcommAllocatorStats_t s = GCOMM_ALLOCATOR_STATS_INITIALIZER;
  EXPECT_EQ(gcommAllocatorGetStats(dead, &s), gcommInvalidArgument);
  EXPECT_EQ(gcommAllocatorGetSummary(dead, nullptr, 0, nullptr), gcommInvalidArgument);
  EXPECT_EQ(gcommAllocatorReleaseCached(dead), gcommInvalidArgument);
  EXPECT_EQ(gcommAllocatorResetPeakStats(dead), gcommInvalidArgument);
  EXPECT_EQ(gcommAllocatorDestroy(dead), gcommInvalidArgument);
  EXPECT_EQ(gcommAllocatorDestroy(nullptr), gcommInvalidArgument);
  EXPECT_NE(last().find("NULL"), std::string::npos) << last();
}

TEST(AllocatorApiCreate, ConfigIsValidated) {
  gcommAllocator_t a = nullptr;
  EXPECT_EQ(gcommAllocatorCreate(gcommHostDevice(), nullptr, nullptr), gcommInvalidArgument);
  const gcommAllocatorConfig_t defaults = GCOMM_ALLOCATOR_CONFIG_INITIALIZER;
  gcommAllocatorConfig_t c = defaults;
  c.kind = gcommMemoryPinnedHost;
  EXPECT_EQ(gcommAllocatorCreate(gcommHostDevice(), &c, &a), gcommInvalidArgument);
  EXPECT_NE(last().find("needs a CUDA device"), std::string::npos) << last();
  c = defaults;
  c.kind = static_cast<gcommMemoryKind_t>(17);
  EXPECT_EQ(gcommAllocatorCreate(gcommHostDevice(), &c, &a), gcommInvalidArgument);
  EXPECT_NE(last().find("17 is not a gcommMemoryKind_t"), std::string::npos) << last();
  c = defaults;
  c.pool_limit = 0;
  EXPECT_EQ(gcommAllocatorCreate(gcommHostDevice(), &c, &a), gcommInvalidArgument);
  EXPECT_NE(last().find("gcommAllocatorConfig_t.pool_limit"), std::string::npos) << last();
  c = defaults;
  c.max_split_size = 1 << 20;
  EXPECT_EQ(gcommAllocatorCreate(gcommHostDevice(), &c, &a), gcommInvalidArgument);
  EXPECT_NE(last().find("max_split_size"), std::string::npos) << last();
  c = defaults;
  c.magic = 0;
  EXPECT_EQ(gcommAllocatorCreate(gcommHostDevice(), &c, &a), gcommInvalidArgument);
  EXPECT_NE(last().find("_INITIALIZER"), std::string::npos) << last();
  EXPECT_EQ(a, nullptr) << "no handle on failure";
}

TEST(AllocatorApiCreate, CudaDeviceWithoutAGpuIsRefusedWithTheReason) {
  int n = 0;
  ASSERT_EQ(gcommGetCudaDeviceCount(&n), gcommSuccess);
  if (n > 0) GTEST_SKIP() << "a GPU is present";
  gcommAllocator_t a = nullptr;
  EXPECT_EQ(gcommAllocatorCreate(gcommCudaDevice(0), nullptr, &a), gcommInvalidArgument);
  EXPECT_NE(last().find("no usable GPU"), std::string::npos) << last();
}

TEST(AllocatorApiCreate, PoolLimitOutOfMemoryNamesTheKnob) {
  gcommAllocatorConfig_t c = GCOMM_ALLOCATOR_CONFIG_INITIALIZER;
  c.pool_limit = 4 << 20;
  gcommAllocator_t a = nullptr;
  ASSERT_EQ(gcommAllocatorCreate(gcommHostDevice(), &c, &a), gcommSuccess) << last();
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(gcommAllocatorMalloc(a, 8 << 20, nullptr, &p), gcommOutOfMemory);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1));
  EXPECT_NE(last().find("8388608 bytes"), std::string::npos) << last();
  EXPECT_NE(last().find("gcommAllocatorConfig_t.pool_limit"), std::string::npos) << last();
  gcommAllocatorStats_t s = GCOMM_ALLOCATOR_STATS_INITIALIZER;
  ASSERT_EQ(gcommAllocatorGetStats(a, &s), gcommSuccess);
  EXPECT_EQ(s.ooms, 1u);
  EXPECT_EQ(gcommAllocatorDestroy(a), gcommSuccess);
}

TEST(AllocatorApiGpu, CallersDeviceIsUnchanged) {
  int n = 0;
  ASSERT_EQ(gcommGetCudaDeviceCount(&n), gcommSuccess);
  if (n == 0) GTEST_SKIP() << "no usable GPU";
  gcommAllocator_t a = nullptr;
  ASSERT_EQ(gcommAllocatorCreate(gcommCudaDevice(n - 1), nullptr, &a), gcommSuccess) << last();
  void* p = nullptr;
  ASSERT_EQ(gcommAllocatorMalloc(a, 1 << 20, nullptr, &p), gcommSuccess) << last();
  ASSERT_EQ(gcommAllocatorFree(a, p, nullptr), gcommSuccess) << last();
  ASSERT_EQ(gcommAllocatorReleaseCached(a), gcommSuccess) << last();
  ASSERT_EQ(gcommAllocatorDestroy(a), gcommSuccess) << last();
}

}  // namespace
