// The local transport and the communicator when things go wrong: mismatched
// calls, a stuck peer (timeout naming it), abort from another thread, calls
// after a failure, bad arguments — each a clear status, never a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ranks.hpp"

namespace gradcomm::test {
namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(LocalFailures, MismatchedCollectivesFailOnEveryRankAndTheCommStaysUsable) {
  auto comms = make_local(2);
  std::vector<float> a(8, 1.0f), b(8, 2.0f);
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    gcommStatus_t s = r == 0 ? gcommAllReduce(c, a.data(), a.data(), 8, gcommFloat32, gcommSum, nullptr)
                             : gcommBroadcast(c, b.data(), b.data(), 8, gcommFloat32, 0, nullptr);
    return s == gcommInvalidArgument ? gcommGetLastError() : "unexpected status";
  });
  for (auto& e : errors) EXPECT_TRUE(contains(e, "different collectives")) << e;
  EXPECT_TRUE(contains(errors[0], "rank 1 called broadcast")) << errors[0];
  // Still usable.
  errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    std::vector<float>& buf = r == 0 ? a : b;
    return gcommAllReduce(c, buf.data(), buf.data(), 8, gcommFloat32, gcommSum, nullptr) == gcommSuccess
               ? ""
               : gcommGetLastError();
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  destroy(comms);
}

TEST(LocalFailures, StuckPeerTimesOutNamingItThenEveryCallFails) {
  auto comms = make_local(3, 0.3);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(16, 1.0f));
  auto start = Clock::now();
  auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
    if (r == 2) return "";  // never calls
    gcommStatus_t s = gcommAllReduce(c, bufs[r].data(), bufs[r].data(), 16, gcommFloat32, gcommSum, nullptr);
    return std::string(gcommGetStatusName(s)) + ": " + gcommGetLastError();
  });
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(elapsed, 5.0) << "bounded by the timeout";
  for (int r = 0; r < 2; ++r) {
    // One rank times out; the other sees it as a remote failure (or times out too).
    EXPECT_TRUE(contains(errors[r], "gcommTimeout") || contains(errors[r], "gcommRemoteError")) << errors[r];
    EXPECT_TRUE(contains(errors[r], "rank 2 never arrived")) << errors[r];
    // The message names the call (formatted only now, on failure).
    EXPECT_TRUE(contains(errors[r], "all-reduce #1 of 64 bytes: rank 2 never arrived")) << errors[r];
  }
  // The late rank finds the group failed instead of hanging.
  gcommStatus_t late =
      gcommAllReduce(comms[2], bufs[2].data(), bufs[2].data(), 16, gcommFloat32, gcommSum, nullptr);
  EXPECT_EQ(late, gcommRemoteError) << gcommGetLastError();
  // A failed communicator refuses everything but destroy, with the first failure.
  gcommStatus_t again = gcommBarrier(comms[0], nullptr);
  EXPECT_NE(again, gcommSuccess);
  EXPECT_TRUE(contains(gcommGetLastError(), "only accepts destroy")) << gcommGetLastError();
  // ... naming the failed call once (the transport's message already names it).
  EXPECT_TRUE(contains(gcommGetLastError(), "all-reduce #1 of 64 bytes: rank 2 never arrived"))
      << gcommGetLastError();
  EXPECT_FALSE(contains(gcommGetLastError(), "64 bytes: all-reduce #1")) << gcommGetLastError();
  gcommStatus_t health = gcommSuccess;
  EXPECT_EQ(gcommCommGetAsyncError(comms[0], &health), gcommSuccess);
  EXPECT_NE(health, gcommSuccess);
  destroy(comms);
}

TEST(LocalFailures, AbortFromAnotherThreadWakesTheWaiter) {
  auto comms = make_local(2, 60.0);
  std::vector<float> buf(4, 1.0f);
  gcommStatus_t status = gcommSuccess;
  std::string message;
  auto start = Clock::now();
  std::thread waiter([&] {
    status = gcommAllReduce(comms[0], buf.data(), buf.data(), 4, gcommFloat32, gcommSum, nullptr);
    message = gcommGetLastError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(gcommCommAbort(comms[1]), gcommSuccess);
  waiter.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  EXPECT_EQ(status, gcommRemoteError) << message;
  EXPECT_TRUE(contains(message, "rank 1 aborted")) << message;
  // The waiter's message names its own call too, not only the peer's failure.
  EXPECT_TRUE(contains(message, "all-reduce #1 of 16 bytes: ")) << message;
  EXPECT_EQ(gcommAllReduce(comms[1], buf.data(), buf.data(), 4, gcommFloat32, gcommSum, nullptr),
            gcommAborted);
  destroy(comms);
}

// The same for a send whose peer fails while it waits for the receive: the sender's
// message names the send (it used to carry only the peer's failure, so which call
// of the sender's failed depended on which rank timed out first).
TEST(LocalFailures, ASendWhosePeerAbortsNamesTheSend) {
  auto comms = make_local(2, 60.0);
  std::vector<float> buf(4, 1.0f);
  gcommStatus_t status = gcommSuccess;
  std::string message;
  std::thread sender([&] {
    status = gcommSend(comms[0], buf.data(), 4, gcommFloat32, 1, nullptr);
    message = gcommGetLastError();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(gcommCommAbort(comms[1]), gcommSuccess);
  sender.join();
  EXPECT_EQ(status, gcommRemoteError) << message;
  EXPECT_TRUE(contains(message, "gcommSend: send #1 of 16 bytes to rank 1: ")) << message;
  EXPECT_TRUE(contains(message, "rank 1 aborted")) << message;
  destroy(comms);
}

TEST(LocalFailures, BadArgumentsAreRefusedBeforeAnythingRuns) {
  auto comms = make_local(1);
  gcommComm_t c = comms[0];
  std::vector<float> buf(4, 1.0f);
  EXPECT_EQ(gcommAllReduce(c, nullptr, buf.data(), 4, gcommFloat32, gcommSum, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "gcommAllReduce: sendbuf is NULL")) << gcommGetLastError();
  EXPECT_EQ(gcommAllReduce(c, buf.data(), buf.data(), 4, static_cast<gcommDataType_t>(9), gcommSum, nullptr),
            gcommInvalidArgument);
  EXPECT_EQ(gcommAllReduce(c, buf.data(), buf.data(), 4, gcommFloat32, static_cast<gcommRedOp_t>(7), nullptr),
            gcommInvalidArgument);
  EXPECT_EQ(gcommBroadcast(c, buf.data(), buf.data(), 4, gcommFloat32, 1, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "root 1 is not a rank")) << gcommGetLastError();
  EXPECT_EQ(gcommAllGather(c, buf.data(), buf.data(), SIZE_MAX / 2, gcommFloat32, nullptr),
            gcommInvalidArgument);
  int rank = -1, size = -1;
  EXPECT_EQ(gcommCommRank(c, &rank), gcommSuccess);
  EXPECT_EQ(gcommCommSize(c, &size), gcommSuccess);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(gcommCommRank(c, nullptr), gcommInvalidArgument);
  gcommTransport_t kind;
  EXPECT_EQ(gcommCommTransport(c, &kind), gcommSuccess);
  EXPECT_EQ(kind, gcommTransportLocal);
  EXPECT_EQ(buf[0], 1.0f);
  EXPECT_EQ(gcommAllReduce(c, buf.data(), buf.data(), 4, gcommFloat32, gcommSum, nullptr), gcommSuccess)
      << "refused calls leave the communicator usable";
  destroy(comms);
  EXPECT_EQ(gcommCommDestroy(c), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "not a live gcommComm_t")) << gcommGetLastError();
  EXPECT_EQ(gcommAllReduce(c, buf.data(), buf.data(), 4, gcommFloat32, gcommSum, nullptr),
            gcommInvalidArgument);
}

// The divergence check through the C API: its arguments are checked before
// anything runs or is written, it is refused inside a group, and a world of one
// agrees with itself.
TEST(LocalFailures, TheDivergenceChecksBadArgumentsAreRefusedAndWriteNothing) {
  auto comms = make_local(1);
  gcommComm_t c = comms[0];
  std::vector<float> buf(4, 1.0f);
  const void* data[2] = {buf.data(), nullptr};
  const size_t bytes[2] = {16, 8};
  int64_t first = 7;
  size_t mismatched = 7;
  EXPECT_EQ(gcommCommCheckDivergence(c, data, bytes, 1, nullptr, nullptr, &mismatched), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "first_mismatch")) << gcommGetLastError();
  EXPECT_EQ(gcommCommCheckDivergence(c, data, bytes, 2, nullptr, &first, &mismatched), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "data[1] is NULL but bytes[1] is 8")) << gcommGetLastError();
  EXPECT_EQ(gcommCommCheckDivergence(c, nullptr, bytes, 2, nullptr, &first, &mismatched),
            gcommInvalidArgument);
  // An absurd n is refused before the arrays are read past their end (ASan would see it).
  EXPECT_EQ(gcommCommCheckDivergence(c, data, bytes, SIZE_MAX, nullptr, &first, &mismatched),
            gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "at most 16777216 spans")) << gcommGetLastError();
  const size_t absurd[1] = {SIZE_MAX / 2};
  EXPECT_EQ(gcommCommCheckDivergence(c, data, absurd, 1, nullptr, &first, &mismatched), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "GCOMM_ADDRESS_LIMIT")) << gcommGetLastError();
  EXPECT_EQ(first, 7);
  EXPECT_EQ(mismatched, 7u);
  ASSERT_EQ(gcommGroupStart(), gcommSuccess);
  EXPECT_EQ(gcommCommCheckDivergence(c, data, bytes, 1, nullptr, &first, &mismatched), gcommInvalidState);
  EXPECT_TRUE(contains(gcommGetLastError(), "not inside a group")) << gcommGetLastError();
  ASSERT_EQ(gcommGroupEnd(), gcommSuccess);
  EXPECT_EQ(gcommCommCheckDivergence(c, data, bytes, 1, nullptr, &first, &mismatched), gcommSuccess);
  EXPECT_EQ(first, -1);
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(gcommCommCheckDivergence(c, nullptr, nullptr, 0, nullptr, &first, nullptr), gcommSuccess);
  destroy(comms);
}

// Issue 17 #1: counts whose bytes fit size_t but reach past any memory crashed in
// memmove (all-gather, broadcast, reduce, reduce-scatter) or came back as an
// internal error (all-reduce). They are refused, naming the buffer, and the
// communicator stays usable.
TEST(LocalFailures, AbsurdCountsAreRefusedBeforeAnyByteIsRead) {
  auto comms = make_local(1);
  gcommComm_t c = comms[0];
  std::vector<float> b(4, 1.0f), o(4, 0.0f);
  auto refused = [&](gcommStatus_t s, const char* call) {
    EXPECT_EQ(s, gcommInvalidArgument) << call << ": " << gcommGetLastError();
    EXPECT_TRUE(contains(gcommGetLastError(), "GCOMM_ADDRESS_LIMIT")) << call << ": " << gcommGetLastError();
  };
  for (size_t count : {SIZE_MAX / 4, SIZE_MAX / 8, static_cast<size_t>(GCOMM_ADDRESS_LIMIT) / 4}) {
    refused(gcommAllGather(c, b.data(), o.data(), count, gcommFloat32, nullptr), "all-gather");
    refused(gcommBroadcast(c, b.data(), o.data(), count, gcommFloat32, 0, nullptr), "broadcast");
    refused(gcommReduce(c, b.data(), o.data(), count, gcommFloat32, gcommSum, 0, nullptr), "reduce");
    refused(gcommAllReduce(c, b.data(), o.data(), count, gcommFloat32, gcommSum, nullptr), "all-reduce");
  }
  refused(gcommReduceScatter(c, b.data(), o.data(), SIZE_MAX / 2, gcommFloat16, gcommSum, nullptr),
          "reduce-scatter");
  for (size_t count : {SIZE_MAX / 4, static_cast<size_t>(GCOMM_ADDRESS_LIMIT) / 4})
    refused(gcommAllToAll(c, b.data(), o.data(), count, gcommFloat32, nullptr), "all-to-all");
  // Separate buffers and a count below the address limit whose span would make them
  // meet: the refusal names the count, not only an overlap the caller cannot see.
  EXPECT_EQ(gcommAllToAll(c, b.data(), o.data(), size_t{1} << 50, gcommFloat32, nullptr),
            gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "count 1125899906842624")) << gcommGetLastError();
  EXPECT_EQ(o[0], 0.0f) << "nothing ran";
  EXPECT_EQ(gcommAllReduce(c, b.data(), o.data(), 4, gcommFloat32, gcommSum, nullptr), gcommSuccess)
      << gcommGetLastError();
  EXPECT_EQ(o[3], 1.0f);
  destroy(comms);
}

// Issue 44 #7's sibling here: the host all-reduce's float scratch was sized by the
// caller's count before the ranks met (a 1 GiB all-reduce whose peer never comes
// took 1 GiB, zeroed, before timing out; an absurd count, as much as the machine
// would give). It goes piece by piece now, through two pieces of scratch.
TEST(LocalFailures, TheAllReduceScratchIsNotSizedByTheCount) {
  auto comms = make_local(2, 1.0);
  const size_t count = size_t{1} << 28;  // 1 GiB of f32, never read: rank 1 never calls
  std::vector<float> x(16);
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM from here
  auto kib = [](const char* field) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field) + 1);
    return 0L;
  };
  const long before = kib("VmRSS:");
  EXPECT_EQ(gcommAllReduce(comms[0], x.data(), x.data(), count, gcommFloat32, gcommSum, nullptr),
            gcommTimeout)
      << gcommGetLastError();
  EXPECT_LT((kib("VmHWM:") - before) / 1024, 128) << "MiB of peak resident memory for the call";
  for (gcommComm_t c : comms) EXPECT_EQ(gcommCommDestroy(c), gcommSuccess) << gcommGetLastError();
}

// Two and three ranks, several pieces, in place and not, every dtype's bits as
// the reference's (the conformance suite runs messages of at most two pieces here).
TEST(LocalCollectives, AnAllReduceOfSeveralPiecesIsExactInPlaceAndNot) {
  for (int n : {2, 3}) {
    auto comms = make_local(n);
    const size_t count = (size_t{5} << 20) + 7;  // two pieces and a half
    std::vector<std::vector<float>> in(n, std::vector<float>(count)), out = in;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<float>((i * 7 + r * 13) % 101) * 0.25f - r;
    for (bool in_place : {false, true}) {
      auto work = in;
      auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
        float* dst = in_place ? work[r].data() : out[r].data();
        return gcommAllReduce(c, work[r].data(), dst, count, gcommFloat32, gcommSum, nullptr) == gcommSuccess
                   ? ""
                   : gcommGetLastError();
      });
      for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << r;
      for (int r = 0; r < n; ++r) {
        const std::vector<float>& got = in_place ? work[r] : out[r];
        for (size_t i = 0; i < count; i += 4099) {
          float sum = 0.0f;
          for (int q = 0; q < n; ++q) sum += in[q][i];
          ASSERT_EQ(got[i], sum) << "rank " << r << " element " << i;
        }
        ASSERT_EQ(got[count - 1], [&] {
          float sum = 0.0f;
          for (int q = 0; q < n; ++q) sum += in[q][count - 1];
          return sum;
        }());
      }
    }
    destroy(comms);
  }
}

// A sibling of issue 17 #1: gcommCommInitAll sized a vector by ndev and read
// devices[] before checking ndev against the GPUs there are (INT_MAX: an 8 GiB
// allocation, then reads past the caller's array). Refused first now.
TEST(LocalFailures, AnAbsurdDeviceCountIsRefusedBeforeTheListIsRead) {
  auto devices = std::make_unique<int[]>(1);
  devices[0] = 0;
  gcommComm_t out = nullptr;
  EXPECT_EQ(gcommCommInitAll(INT_MAX, devices.get(), &out), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "ndev is 2147483647 but")) << gcommGetLastError();
  EXPECT_EQ(out, nullptr);
}

// Issue 17 #5: timeouts of 9.3e9 s and more (up to +inf) overflowed the clock
// into a deadline in the past: the first rank that waited failed at once with
// "never arrived within inf s". They saturate now (wait practically forever).
TEST(LocalFailures, HugeTimeoutsWaitInsteadOfFailingAtOnce) {
  for (double timeout : {std::numeric_limits<double>::infinity(), 1e300, 1e30, 1e10, 9.3e9}) {
    auto comms = make_local(2, timeout);
    std::vector<std::vector<float>> bufs(2, std::vector<float>(8, 1.0f));
    auto errors = run_ranks(comms, [&](int r, gcommComm_t c) -> std::string {
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 waits
      gcommStatus_t s = gcommAllReduce(c, bufs[r].data(), bufs[r].data(), 8, gcommFloat32, gcommSum, nullptr);
      return s == gcommSuccess ? "" : gcommGetLastError();
    });
    EXPECT_EQ(errors[0], "") << "timeout " << timeout;
    EXPECT_EQ(errors[1], "") << "timeout " << timeout;
    EXPECT_EQ(bufs[0][7], 2.0f);
    destroy(comms);
  }
}

// Issue 17 #10: a typo in GRADCOMM_TIMEOUT_S fails the init, naming the variable.
TEST(LocalFailures, AMalformedTimeoutVariableFailsTheInit) {
  setenv("GRADCOMM_TIMEOUT_S", "5x", 1);
  gcommComm_t out[2] = {nullptr, nullptr};
  EXPECT_EQ(gcommCommInitLocal(2, gcommHostDevice(), nullptr, out), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "GRADCOMM_TIMEOUT_S='5x'")) << gcommGetLastError();
  EXPECT_EQ(out[0], nullptr);
  // A timeout in the config does not read the variable.
  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  cfg.timeout_s = 5.0;
  EXPECT_EQ(gcommCommInitLocal(2, gcommHostDevice(), &cfg, out), gcommSuccess) << gcommGetLastError();
  unsetenv("GRADCOMM_TIMEOUT_S");
  std::vector<gcommComm_t> comms(out, out + 2);
  destroy(comms);
}

TEST(LocalFailures, CreationIsValidated) {
  gcommComm_t out[2];
  EXPECT_EQ(gcommCommInitLocal(0, gcommHostDevice(), nullptr, out), gcommInvalidArgument);
  EXPECT_EQ(gcommCommInitLocal(65, gcommHostDevice(), nullptr, out), gcommInvalidArgument);
  EXPECT_EQ(gcommCommInitLocal(2, gcommHostDevice(), nullptr, nullptr), gcommInvalidArgument);
  gcommCommConfig_t bad = GCOMM_COMM_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(gcommCommInitLocal(2, gcommHostDevice(), &bad, out), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "_INITIALIZER")) << gcommGetLastError();
  EXPECT_EQ(gcommGroupEnd(), gcommInvalidState);
  EXPECT_EQ(gcommGroupStart(), gcommSuccess);
  EXPECT_EQ(gcommGroupEnd(), gcommSuccess);
  EXPECT_STREQ(gcommRedOpName(gcommAvg), "avg");
}

}  // namespace
}  // namespace gradcomm::test

namespace gradcomm::test {
namespace {

// A destroyed communicator's handle never names the next one: without the
// registry's quarantine, a world of one made right after another's destroy got
// its address, and the stale handle worked on the new communicator.
TEST(LocalFailures, ADestroyedHandleIsNeverReusedByTheNextCommunicator) {
  std::vector<gcommComm_t> old;
  for (int i = 0; i < 20; ++i) {
    gcommComm_t c = nullptr;
    ASSERT_EQ(gcommCommInitLocal(1, gcommDevice_t{gcommDeviceHost, -1}, nullptr, &c), gcommSuccess);
    for (gcommComm_t stale : old)
      ASSERT_NE(c, stale) << "make " << i << " took a destroyed communicator's handle";
    ASSERT_EQ(gcommCommDestroy(c), gcommSuccess);
    int rank = -1;
    EXPECT_EQ(gcommCommRank(c, &rank), gcommInvalidArgument);
    old.push_back(c);
  }
}

}  // namespace
}  // namespace gradcomm::test
