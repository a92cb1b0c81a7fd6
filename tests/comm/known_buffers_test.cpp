// The allocations a communicator remembers as checked (comm/known_buffers.hpp),
// and the communicator's use of them: on a GPU a loop of calls on the same
// buffers asks the driver nothing after the first, a new allocation once, and
// memory the GPU cannot use is refused all the same; GRADCOMM_CHECK_POINTERS=1
// asks on every call; on the host every call asks, as before.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/known_buffers.hpp"
#include "comm/local/local_transport.hpp"
#include "common/device.hpp"
#include "support/gpu.hpp"

namespace gradcomm::comm {
namespace {

const void* at(uintptr_t p) {
  return reinterpret_cast<const void*>(p);
}

TEST(KnownBuffers, CoversOnlySpansInsideOneRememberedAllocation) {
  KnownBuffers known;
  EXPECT_FALSE(known.covers(at(0x1000), 4));  // nothing remembered
  known.add(0x1000, 0x2000);
  EXPECT_TRUE(known.covers(at(0x1000), 0x1000));  // the whole allocation
  EXPECT_TRUE(known.covers(at(0x1ffc), 4));       // its last four bytes
  EXPECT_FALSE(known.covers(at(0x1ffc), 5));      // one byte past its end
  EXPECT_FALSE(known.covers(at(0xfff), 4));       // starts before it
  EXPECT_FALSE(known.covers(at(0x2000), 1));      // the next allocation's first byte
  // A span that would wrap past the address limit is not inside.
  known.add(UINTPTR_MAX - 0xff, UINTPTR_MAX);
  EXPECT_FALSE(known.covers(at(UINTPTR_MAX - 0x10), SIZE_MAX));
  // Two allocations side by side: a span across both is inside neither.
  known.add(0x2000, 0x3000);
  EXPECT_FALSE(known.covers(at(0x1f00), 0x200));
}

TEST(KnownBuffers, AnEmptyRangeIsNotRemembered) {
  KnownBuffers known;
  known.add(0x1000, 0x1000);
  known.add(0x2000, 0x1000);
  EXPECT_EQ(known.size(), 0u);
  EXPECT_FALSE(known.covers(at(0x1000), 0));
}

TEST(KnownBuffers, KeepsTheMostRecentlyUsedPastItsCapacity) {
  KnownBuffers known;
  const uintptr_t page = 0x10000;
  for (uintptr_t i = 1; i <= KnownBuffers::kCapacity; ++i) known.add(i * page, i * page + 0x100);
  EXPECT_EQ(known.size(), KnownBuffers::kCapacity);
  EXPECT_TRUE(known.covers(at(1 * page), 8));  // the oldest, used again: now the most recent
  known.add(100 * page, 100 * page + 0x100);   // one more: the least recently used (the second) goes
  EXPECT_EQ(known.size(), KnownBuffers::kCapacity);
  EXPECT_TRUE(known.covers(at(1 * page), 8));
  EXPECT_FALSE(known.covers(at(2 * page), 8));
  EXPECT_TRUE(known.covers(at(3 * page), 8));
  EXPECT_TRUE(known.covers(at(100 * page), 8));
  // Adding a remembered range again keeps one copy of it.
  known.add(3 * page, 3 * page + 0x100);
  EXPECT_EQ(known.size(), KnownBuffers::kCapacity);
  known.clear();
  EXPECT_FALSE(known.covers(at(3 * page), 8));
}

// How many driver queries `calls` all-reduces of [send, send + count) into recv ask.
uint64_t lookups_for(Communicator& comm, const float* send, float* recv, size_t count, int calls) {
  const uint64_t before = pointer_lookups();
  for (int i = 0; i < calls; ++i)
    comm.collective(collective_call(Collective::kAllReduce, send, recv, count, gcommFloat32, nullptr));
  return pointer_lookups() - before;
}

TEST(CommunicatorBuffers, OnTheHostEveryCallAsks) {
  auto transports = make_local_transports(1, gcommHostDevice(), 30.0);
  Communicator comm(std::move(transports[0]), 30.0);
  std::vector<float> a(1024, 1.0f), b(1024);
  EXPECT_EQ(lookups_for(comm, a.data(), b.data(), 1024, 10), 20u);
  EXPECT_EQ(lookups_for(comm, b.data(), b.data(), 1024, 10), 10u);  // in place: one answers for both
}

TEST(CommunicatorBuffers, OnAGpuEachAllocationIsAskedAboutOnce) {
  GCOMM_SKIP_WITHOUT_GPU();
  for (const bool every_call : {false, true}) {
    if (every_call) setenv("GRADCOMM_CHECK_POINTERS", "1", 1);
    auto transports = make_local_transports(1, gcommCudaDevice(0), 30.0);
    Communicator comm(std::move(transports[0]), 30.0);
    if (every_call) unsetenv("GRADCOMM_CHECK_POINTERS");
    float *a = nullptr, *b = nullptr, *fresh = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&a), 4096), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&b), 4096), cudaSuccess);
    ASSERT_EQ(cudaMemset(a, 0, 4096), cudaSuccess);
    EXPECT_EQ(lookups_for(comm, a, b, 1024, 1), 2u);
    EXPECT_EQ(lookups_for(comm, a + 8, b + 8, 1000, 100), every_call ? 200u : 0u);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&fresh), 4096), cudaSuccess);
    ASSERT_EQ(cudaMemset(fresh, 0, 4096), cudaSuccess);
    EXPECT_EQ(lookups_for(comm, fresh, fresh, 1024, 10), every_call ? 10u : 1u);
    std::vector<float> host(1024, 1.0f);
    EXPECT_THROW(lookups_for(comm, host.data(), b, 1024, 1), Error);  // host memory: refused, as before
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (float* p : {a, b, fresh}) EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
}

}  // namespace
}  // namespace gradcomm::comm
