// Group calls (gcommGroupStart/End) on the host: they nest per thread, ends must
// match starts, collectives inside a group work on the local transport (one
// thread per rank), a communicator with calls in an open group can be neither
// destroyed nor synchronized, and the reducer refuses to run inside a group (a
// group would launch its all-reduces after its kernels). The NCCL launch at the
// group's end runs in tests/comm/gpu_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ranks.hpp"

namespace gradcomm::test {
namespace {

bool last_error_has(const char* part) {
  return std::string(gcommGetLastError()).find(part) != std::string::npos;
}

TEST(Groups, NestPerThreadAndEndsMustMatchStarts) {
  EXPECT_EQ(gcommGroupEnd(), gcommInvalidState);
  EXPECT_TRUE(last_error_has("without a matching gcommGroupStart")) << gcommGetLastError();
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  // Another thread is not inside this thread's group.
  std::thread([] { EXPECT_EQ(gcommGroupEnd(), gcommInvalidState); }).join();
  EXPECT_EQ(gcommGroupEnd(), gcommSuccess);
  EXPECT_EQ(gcommGroupEnd(), gcommSuccess);
  EXPECT_EQ(gcommGroupEnd(), gcommInvalidState);
}

TEST(Groups, CollectivesInsideAGroupOnEachRanksThread) {
  auto comms = make_local(3);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float> a(1001, 1.0f + r), b(77, 10.0f * (r + 1));
    if (gcommGroupStart() != gcommSuccess) return gcommGetLastError();
    if (gcommAllReduce(c, a.data(), a.data(), a.size(), gcommFloat32, gcommSum, nullptr) != gcommSuccess)
      return gcommGetLastError();
    if (gcommAllReduce(c, b.data(), b.data(), b.size(), gcommFloat32, gcommMax, nullptr) != gcommSuccess)
      return gcommGetLastError();
    if (gcommGroupEnd() != gcommSuccess) return gcommGetLastError();
    if (a[1000] != 6.0f || b[76] != 30.0f)
      return "sum " + std::to_string(a[1000]) + " (6 expected), max " + std::to_string(b[76]) +
             " (30 expected)";
    return "";
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  destroy(comms);
}

TEST(Groups, ACommunicatorWithCallsInAnOpenGroupIsNotDestroyedNorSynchronized) {
  auto comms = make_local(1);
  std::vector<float> a(16, 2.0f);
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  ASSERT_EQ(gcommAllReduce(comms[0], a.data(), a.data(), a.size(), gcommFloat32, gcommSum, nullptr),
            gcommSuccess);
  EXPECT_EQ(gcommCommDestroy(comms[0]), gcommInvalidState);
  EXPECT_TRUE(last_error_has("in a group not yet ended")) << gcommGetLastError();
  // Nor waited for: the calls have not launched.
  EXPECT_EQ(gcommCommSynchronize(comms[0]), gcommInvalidState);
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess);
  EXPECT_EQ(gcommCommSynchronize(comms[0]), gcommSuccess) << gcommGetLastError();
  destroy(comms);
}

TEST(Groups, TheReducerRefusesToRunInsideAGroupAndStaysUsable) {
  auto comms = make_local(1);
  std::vector<float> g0(100, 3.0f), g1(50, 5.0f);
  gcommTensor_t grads[] = {{g0.data(), g0.size(), gcommFloat32}, {g1.data(), g1.size(), gcommFloat32}};
  gcommReducer_t r = nullptr;
  ASSERT_EQ(gcommReducerCreate(comms[0], grads, 2, nullptr, &r), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  EXPECT_EQ(gcommReducerBeginStep(r, 1), gcommInvalidState);
  EXPECT_TRUE(last_error_has("gcommReducerBeginStep inside gcommGroupStart/End")) << gcommGetLastError();
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess);
  ASSERT_EQ(gcommReducerBeginStep(r, 1), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommReducerMarkReady(r, 1, nullptr), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  EXPECT_EQ(gcommReducerMarkReady(r, 0, nullptr), gcommInvalidState);
  EXPECT_EQ(gcommReducerFinalize(r, nullptr, nullptr), gcommInvalidState);
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess);
  ASSERT_EQ(gcommReducerMarkReady(r, 0, nullptr), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(gcommReducerFinalize(r, nullptr, nullptr), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(g0[99], 3.0f);  // one rank: the average is the input
  EXPECT_EQ(gcommReducerDestroy(r), gcommSuccess);
  destroy(comms);
}

}  // namespace
}  // namespace gradcomm::test
