// How the socket and shm transports fail (one suite, both wires: the collectives
// are the same code over comm/exchange/): never a hang, always a message that
// names the rank and the collective. Ranks that call different collectives; a
// rank that never calls (timeout); an abort from another thread; a rank whose
// communicator is gone; a barrier that really waits for every rank.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "socket_ranks.hpp"

namespace gradcomm::test {
namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Ranks called different collectives: every rank failed; a rank that read the
// other's header says so, naming `call` (the other rank's), the others got a remote error.
void expect_mismatch_reported(const std::vector<gcommStatus_t>& status,
                              const std::vector<std::string>& errors, const std::string& call) {
  int told = 0;
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_NE(status[r], gcommSuccess) << errors[r];
    if (status[r] == gcommInvalidArgument) {
      ++told;
      EXPECT_TRUE(contains(errors[r], "ranks called different collectives")) << errors[r];
      EXPECT_TRUE(contains(errors[r], call)) << errors[r];
    } else {
      EXPECT_EQ(status[r], gcommRemoteError) << errors[r];
    }
  }
  EXPECT_GE(told, 1) << "the rank that saw the other header names both calls";
}

class Failures : public ::testing::TestWithParam<gcommTransport_t> {
 protected:
  std::vector<gcommComm_t> make(int n, double timeout_s) {
    return make_socket(n, timeout_s, "failures", GetParam());
  }
};

TEST_P(Failures, DifferentCollectivesFailEveryRankAndTheCommunicatorStaysFailed) {
  auto comms = make(3, 20);
  std::vector<float> a(64, 1.0f), b(64, 1.0f);
  std::vector<gcommStatus_t> status(3);
  auto start = Clock::now();
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    status[r] = gcommAllReduce(c, a.data(), b.data(), r == 1 ? 32 : 64, gcommFloat32, gcommSum, nullptr);
    return gcommGetLastError();
  });
  EXPECT_LT(since(start), 10.0) << "well before the 20 s timeout";
  expect_mismatch_reported(status, errors, "all-reduce(count 32, f32, sum)");
  // The byte streams are out of step: nothing more goes through.
  errors = run_ranks(comms, [&](int, gcommComm_t c) -> std::string {
    return gcommBarrier(c, nullptr) == gcommSuccess ? "" : gcommGetLastError();
  });
  for (int r = 0; r < 3; ++r) EXPECT_NE(errors[r], "") << "rank " << r;
  destroy_together(comms);
}

// The same in a pipelined all-reduce of several pieces (one gated run of messages
// per peer): the rank that reads a mismatching header fails while it is in the
// middle of sending a slice, and finishes that message before its failure notice
// from state that outlives the call (ASan in CI watches that nothing reads the
// call's queues after it threw).
TEST_P(Failures, DifferentCountsInAPipelinedAllReduceFailEveryRank) {
  auto comms = make(3, 20);
  const size_t count = 3 * (size_t{8} << 20) / sizeof(float);
  std::vector<std::vector<float>> in(3, std::vector<float>(count + 3, 1.0f)), out = in;
  std::vector<gcommStatus_t> status(3);
  auto start = Clock::now();
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    status[r] = gcommAllReduce(c, in[r].data(), out[r].data(), r == 2 ? count + 3 : count, gcommFloat32,
                               gcommSum, nullptr);
    return gcommGetLastError();
  });
  EXPECT_LT(since(start), 10.0) << "well before the 20 s timeout";
  expect_mismatch_reported(status, errors, "all-reduce(count " + std::to_string(count + 3) + ", f32, sum)");
  destroy_together(comms);
}

TEST_P(Failures, ARankThatNeverCallsIsNamedAtTheTimeout) {
  // 2 s: rank 1's prompt failure below must stand apart from its own timeout on a loaded CI machine.
  auto comms = make(2, 2.0);
  std::vector<float> x(1000, 2.0f);
  auto start = Clock::now();
  EXPECT_EQ(gcommAllReduce(comms[0], x.data(), x.data(), x.size(), gcommFloat32, gcommSum, nullptr),
            gcommTimeout);
  std::string error = gcommGetLastError();
  EXPECT_LT(since(start), 5.0);
  EXPECT_TRUE(contains(error, "all-reduce #1")) << error;
  EXPECT_TRUE(contains(error, "waiting for data from rank 1")) << error;
  // Rank 0 told rank 1 why and closed its connections (rings): rank 1 learns it at once.
  start = Clock::now();
  EXPECT_EQ(gcommAllReduce(comms[1], x.data(), x.data(), x.size(), gcommFloat32, gcommSum, nullptr),
            gcommRemoteError);
  error = gcommGetLastError();
  EXPECT_LT(since(start), 1.5) << "before its own timeout";
  EXPECT_TRUE(contains(error,
                       "all-reduce #1 of 4000 bytes: rank 0 failed: all-reduce #1 of 4000 bytes did not "
                       "complete within the timeout on rank 0: waiting for data from rank 1"))
      << error;
  destroy_together(comms);
}

TEST_P(Failures, AbortFromAnotherThreadEndsABlockedCall) {
  auto comms = make(2, 30);
  std::vector<float> x(1000, 2.0f);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(gcommCommAbort(comms[0]), gcommSuccess);
  });
  auto start = Clock::now();
  EXPECT_EQ(gcommAllReduce(comms[0], x.data(), x.data(), x.size(), gcommFloat32, gcommSum, nullptr),
            gcommAborted);
  EXPECT_LT(since(start), 5.0) << "not the 30 s timeout";
  aborter.join();
  // The same call on rank 1 fails at once (not at its 30 s timeout), naming rank 0.
  start = Clock::now();
  EXPECT_EQ(gcommAllReduce(comms[1], x.data(), x.data(), x.size(), gcommFloat32, gcommSum, nullptr),
            gcommRemoteError);
  EXPECT_TRUE(contains(gcommGetLastError(), GetParam() == gcommTransportShm ? "rank 0 closed its communicator"
                                                                            : "rank 0 closed its connection"))
      << gcommGetLastError();
  EXPECT_LT(since(start), 5.0);
  destroy_together(comms);
}

TEST_P(Failures, ABarrierWaitsForTheLastRank) {
  auto comms = make(3, 20);
  std::atomic<bool> last_arrived{false};
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      last_arrived = true;
    }
    if (gcommBarrier(c, nullptr) != gcommSuccess) return gcommGetLastError();
    return last_arrived.load() ? "" : "left the barrier before rank 2 arrived";
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  destroy_together(comms);
}

TEST(SocketFailures, JobsWithAnotherKeyOrWorldSizeDoNotMix) {
  // Rank 1 comes with another job key: the store refuses it, rank 0 times out naming it.
  const int port = free_tcp_port();
  std::vector<gcommComm_t> comms(2, nullptr);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t) -> std::string {
    gcommCommConfig_t c = socket_config(r, 2, port, 1.0, r == 0 ? "job-a" : "job-b");
    return gcommCommInit(&c, &comms[r]) == gcommSuccess ? "" : gcommGetLastError();
  });
  EXPECT_TRUE(contains(errors[0], "rank 1 of 2 never connected")) << errors[0];
  EXPECT_NE(errors[1], "");
  EXPECT_EQ(comms[0], nullptr);
  EXPECT_EQ(comms[1], nullptr);
}

INSTANTIATE_TEST_SUITE_P(Wires, Failures, ::testing::Values(gcommTransportSocket, gcommTransportShm),
                         [](const ::testing::TestParamInfo<gcommTransport_t>& info) {
                           return std::string(gcommGetTransportName(info.param));
                         });

}  // namespace
}  // namespace gradcomm::test
