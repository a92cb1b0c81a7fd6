// How the socket and shm transports fail (one suite, both wires: the collectives
// are the same code over comm/exchange/): never a hang, always a message that
// names the rank and the collective. Ranks that call different collectives; a
// rank that never calls (timeout); an abort from another thread; a rank whose
// communicator is gone; a barrier that really waits for every rank.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "socket_ranks.hpp"

// gtest prints the parameter by this (ADL finds it beside the C enum): "shm", not "5".
static void PrintTo(gcommTransport_t t, std::ostream* os) {
  *os << gcommGetTransportName(t);
}

namespace gradcomm::test {
namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// This process's resident memory in KiB (/proc/self/status: "VmRSS", "VmHWM").
long status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1);
  return 0;
}
long resident_kib() {
  return status_kib("VmRSS");
}
long peak_resident_kib() {
  return status_kib("VmHWM");
}
// Starts VmHWM again from the current resident size (Linux >= 4.0).
void reset_peak_resident() {
  std::ofstream("/proc/self/clear_refs") << "5";
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

// Issue 44 #7: an absurd count below the address limit (2^44 floats from a 64 MiB
// buffer, the peer never calling) is planned piece by piece as the data moves, so
// the timeout holds and memory stays flat. Before, the pipelined all-reduce listed
// every piece's slices and messages first (8.4 million pieces here: gigabytes,
// and seconds past the timeout before a byte moved). Only the first pieces' bytes
// are read, as far as the peer's buffers take them.
TEST_P(Failures, AnAbsurdCountIsPlannedAsTheDataMovesSoTheTimeoutHolds) {
  auto comms = make(2, 2.0);
  std::vector<float> x((size_t{64} << 20) / sizeof(float), 1.0f);
  const size_t absurd = size_t{1} << 44;
  const long before_kib = resident_kib();
  reset_peak_resident();
  auto start = Clock::now();
  EXPECT_EQ(gcommAllReduce(comms[0], x.data(), x.data(), absurd, gcommFloat32, gcommSum, nullptr),
            gcommTimeout)
      << gcommGetLastError();
  const double took = since(start);
  EXPECT_TRUE(contains(gcommGetLastError(), "waiting for data from rank 1")) << gcommGetLastError();
  EXPECT_LT(took, 6.0) << "the 2 s timeout holds";
  const long grew_mib = (peak_resident_kib() - before_kib) / 1024;
  EXPECT_LT(grew_mib, 256) << "MiB of peak resident memory for the call";
  destroy_together(comms);
}

// Issue 44 #8: one communicator called from two threads at once (the default
// communicator of a Python process handed to several threads): the second call is
// refused naming the misuse, and the communicator fails on every rank, so no
// rank takes a sum made of other threads' calls. Before, both calls ran
// concurrently in the transport: sums of mixed pieces, reported as success.
TEST_P(Failures, TwoThreadsInOneCommunicatorAtOnceFailItClearly) {
  auto comms = make(2, 10.0);
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f), c(1000, 3.0f);
  gcommStatus_t first = gcommSuccess;
  std::string first_error;
  std::thread inside([&] {  // rank 0's first thread: waits in the call for rank 1
    first = gcommAllReduce(comms[0], a.data(), a.data(), a.size(), gcommFloat32, gcommSum, nullptr);
    first_error = gcommGetLastError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto start = Clock::now();
  const gcommStatus_t second =
      gcommAllReduce(comms[0], b.data(), b.data(), b.size(), gcommFloat32, gcommSum, nullptr);
  const std::string second_error = gcommGetLastError();
  EXPECT_LT(since(start), 1.0) << "refused at once";
  EXPECT_EQ(second, gcommInvalidState) << second_error;
  EXPECT_TRUE(contains(second_error, "another thread")) << second_error;
  inside.join();
  EXPECT_NE(first, gcommSuccess) << "the first call's partner may be either thread's: it fails too";
  // Rank 1 learns it at once instead of pairing with either thread.
  start = Clock::now();
  EXPECT_NE(gcommAllReduce(comms[1], c.data(), c.data(), c.size(), gcommFloat32, gcommSum, nullptr),
            gcommSuccess);
  EXPECT_LT(since(start), 5.0) << gcommGetLastError();
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
                         [](const ::testing::TestParamInfo<gcommTransport_t>& wire) {
                           return std::string(gcommGetTransportName(wire.param));
                         });

}  // namespace
}  // namespace gradcomm::test
