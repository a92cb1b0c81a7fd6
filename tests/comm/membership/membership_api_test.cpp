// The C API of fault-tolerant jobs (include/gradcomm/membership.h) through the
// shared library: members as threads of this process, each with its own
// membership and socket-transport communicators, the server started in-process.
// The processes (kills, freezes, restarts) are in membership_process_test.cpp.
#include <gradcomm/gradcomm.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.hpp"

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class MembershipApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(gcommStoreServerStart("127.0.0.1", 0, &server_), gcommSuccess) << gcommGetLastError();
    int port = 0;
    ASSERT_EQ(gcommStoreServerPort(server_, &port), gcommSuccess);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override { EXPECT_EQ(gcommStoreServerStop(server_), gcommSuccess); }

  gcommMembershipConfig_t config(int min_ranks, const char* job = "api") const {
    gcommMembershipConfig_t c = GCOMM_MEMBERSHIP_CONFIG_INITIALIZER;
    c.store = address_.c_str();
    c.job_key = job;
    c.min_ranks = min_ranks;
    c.timeout_s = 20;
    c.transport = gcommTransportSocket;
    return c;
  }

  gcommStoreServer_t server_ = nullptr;
  std::string address_;
};

// One all-reduce of {rank + 1} and a vote; returns the sum, or -1 if the step was discarded.
float step(gcommMembership_t m, gcommComm_t comm, int rank) {
  float x = static_cast<float>(rank + 1);
  const int ok = gcommAllReduce(comm, &x, &x, 1, gcommFloat32, gcommSum, nullptr) == gcommSuccess;
  int committed = 0;
  EXPECT_EQ(gcommMembershipCommit(m, ok, ok ? nullptr : gcommGetLastError(), &committed), gcommSuccess)
      << gcommGetLastError();
  return committed ? x : -1.0f;
}

TEST_F(MembershipApi, AMemberThatLeavesEndsItsGenerationAndTheOthersGoOnWithoutIt) {
  std::vector<std::string> errors(3);
  std::vector<float> last(3, 0.0f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      gcommMembershipConfig_t c = config(3);
      gcommMembership_t m = nullptr;
      if (gcommMembershipJoin(&c, &m) != gcommSuccess) return void(errors[t] = gcommGetLastError());
      gcommComm_t comm = nullptr, first = nullptr;
      gcommMembershipView_t view{};
      for (int s = 0; s < 3; ++s) {
        if (gcommMembershipQuorum(m, &comm, &view) != gcommSuccess)
          return void(errors[t] = gcommGetLastError());
        if (first == nullptr) first = comm;
        if (step(m, comm, view.rank) != 6.0f) errors[t] = "a step of three members did not sum to 6";
      }
      if (view.rank == 2) {  // leaves at a step boundary
        gcommMembershipLeave(m);
        return;
      }
      float sum = -1;
      for (int s = 0; s < 20 && sum != 3.0f; ++s) {  // discarded until the next generation
        if (gcommMembershipQuorum(m, &comm, &view) != gcommSuccess)
          return void(errors[t] = gcommGetLastError());
        sum = step(m, comm, view.rank);
      }
      last[t] = sum;
      int rank = -1;
      if (gcommCommRank(first, &rank) != gcommInvalidArgument)
        errors[t] = "the first generation's communicator handle is still accepted";
      else if (!has(gcommGetLastError(), "is not a live gcommComm_t"))
        errors[t] = std::string("unexpected: ") + gcommGetLastError();
      if (view.generation != 2 || view.world_size != 2) errors[t] = "not generation 2 of 2 ranks";
      gcommMembershipStats_t stats = GCOMM_MEMBERSHIP_STATS_INITIALIZER;
      EXPECT_EQ(gcommMembershipGetStats(m, &stats), gcommSuccess);
      EXPECT_EQ(stats.generations, 2u);
      EXPECT_EQ(stats.failures_survived, 1u);
      EXPECT_GE(stats.steps_committed, 4u);
      char change[512];
      EXPECT_EQ(gcommMembershipGetChange(m, change, sizeof(change), nullptr), gcommSuccess);
      EXPECT_TRUE(has(change, "rank 2 (") && has(change, "left the job")) << change;
      std::string record(1 << 16, '\0');
      EXPECT_EQ(gcommCommGetFlightRecord(comm, record.data(), record.size(), nullptr), gcommSuccess);
      EXPECT_TRUE(has(record, "\"notes\"") && has(record, "generation 2, rank") &&
                  has(record, "left the job"))
          << "the new communicator's flight record names the change\n"
          << record.substr(0, 2000);
      gcommMembershipLeave(m);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  int survivors = 0;
  for (float x : last) survivors += x == 3.0f ? 1 : 0;
  EXPECT_EQ(survivors, 2) << "ranks 0 and 1 of the second generation sum 1 + 2";
}

// Two members train; a third joins at a step boundary and receives their state
// (10 MiB + 6 bytes: three chunks, sent by both holders in turn).
TEST_F(MembershipApi, ANewcomerReceivesTheStateInChunksFromEveryHolder) {
  constexpr size_t kBytes = (size_t{10} << 20) + 6;
  std::vector<std::string> errors(3);
  std::vector<gcommMembershipStats_t> stats(3, gcommMembershipStats_t(GCOMM_MEMBERSHIP_STATS_INITIALIZER));
  std::atomic<bool> formed{false};
  auto member = [&](int t) {
    std::vector<uint16_t> state(kBytes / 2, 0);
    if (t < 2)
      for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
    gcommMembershipConfig_t c = config(2, "grow");
    gcommMembership_t m = nullptr;
    if (gcommMembershipJoin(&c, &m) != gcommSuccess) return void(errors[t] = gcommGetLastError());
    gcommComm_t comm = nullptr;
    gcommMembershipView_t view{};
    for (int s = 0; s < 500; ++s) {
      if (gcommMembershipQuorum(m, &comm, &view) != gcommSuccess)
        return void(errors[t] = gcommGetLastError());
      formed = true;
      if (view.changed && view.generation == 2) {
        void* data[1] = {state.data()};
        size_t bytes[1] = {kBytes};
        if (view.holders != 2 || view.world_size != 3) errors[t] = "generation 2 is not 2 holders of 3 ranks";
        if (gcommMembershipSyncState(m, data, bytes, 1, nullptr) != gcommSuccess)
          return void(errors[t] = gcommGetLastError());
        break;
      }
      step(m, comm, view.rank);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (size_t i = 0; i < state.size() && errors[t].empty(); ++i)
      if (state[i] != static_cast<uint16_t>(i * 2654435761u >> 7))
        errors[t] = "state differs at element " + std::to_string(i);
    gcommMembershipGetStats(m, &stats[t]);
    gcommMembershipLeave(m);
  };
  std::vector<std::thread> threads;
  threads.emplace_back(member, 0);
  threads.emplace_back(member, 1);
  while (!formed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  threads.emplace_back(member, 2);
  for (auto& th : threads) th.join();
  for (int t = 0; t < 3; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(stats[2].state_bytes_received, kBytes);
  EXPECT_EQ(stats[0].state_bytes_sent + stats[1].state_bytes_sent, kBytes);
  EXPECT_GT(stats[0].state_bytes_sent, 0u) << "both holders send";
  EXPECT_GT(stats[1].state_bytes_sent, 0u) << "both holders send";
}

TEST_F(MembershipApi, BadArgumentsAreRefusedNamingTheField) {
  gcommMembership_t m = nullptr;
  gcommMembershipConfig_t c = config(1);
  c.store = nullptr;
  unsetenv("GRADCOMM_STORE");
  EXPECT_EQ(gcommMembershipJoin(&c, &m), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "set config.store or GRADCOMM_STORE")) << gcommGetLastError();
  c.store = "localhost";
  EXPECT_EQ(gcommMembershipJoin(&c, &m), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "config.store is 'localhost'; it must be host:port"))
      << gcommGetLastError();
  c = config(0);
  EXPECT_EQ(gcommMembershipJoin(&c, &m), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "config.min_ranks is 0")) << gcommGetLastError();
  c = config(1);
  c.transport = gcommTransportMpi;
  EXPECT_EQ(gcommMembershipJoin(&c, &m), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "the MPI transport cannot serve a fault-tolerant job"))
      << gcommGetLastError();
  EXPECT_EQ(m, nullptr) << "nothing written on failure";
  EXPECT_EQ(gcommMembershipJoin(nullptr, nullptr), gcommInvalidArgument);
  int committed = 0;
  EXPECT_EQ(gcommMembershipCommit(nullptr, 1, nullptr, &committed), gcommInvalidArgument);
  EXPECT_EQ(gcommStoreServerStart("127.0.0.1", 70000, nullptr), gcommInvalidArgument);

  // A vote before any quorum, and a member asking for other settings.
  c = config(1, "settings");
  ASSERT_EQ(gcommMembershipJoin(&c, &m), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(gcommMembershipCommit(m, 1, nullptr, &committed), gcommInvalidState);
  EXPECT_TRUE(has(gcommGetLastError(), "call gcommMembershipQuorum first")) << gcommGetLastError();
  char odd[3];
  void* data[1] = {odd};
  size_t bytes[1] = {3};
  EXPECT_EQ(gcommMembershipSyncState(m, data, bytes, 1, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "bytes[0] is 3")) << gcommGetLastError();
  EXPECT_EQ(gcommMembershipSyncState(m, nullptr, nullptr, 1, nullptr), gcommInvalidArgument);
  bytes[0] = SIZE_MAX - 1;
  EXPECT_EQ(gcommMembershipSyncState(m, data, bytes, 1, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "reach past the highest address")) << gcommGetLastError();
  EXPECT_EQ(gcommMembershipSyncState(m, data, bytes, SIZE_MAX, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "spans")) << gcommGetLastError();
  gcommMembershipConfig_t other = config(2, "settings");
  gcommMembership_t m2 = nullptr;
  EXPECT_EQ(gcommMembershipJoin(&other, &m2), gcommInvalidArgument);
  EXPECT_TRUE(has(gcommGetLastError(), "runs with min_ranks 1")) << gcommGetLastError();
  EXPECT_EQ(gcommMembershipLeave(m), gcommSuccess);
  EXPECT_EQ(gcommMembershipLeave(m), gcommInvalidArgument) << "a membership left is no handle any more";
  // The job closes with its last member (once the server read its goodbye): the
  // key is free for other settings.
  gcommStatus_t joined = gcommInvalidArgument;
  for (int i = 0; i < 200 && joined != gcommSuccess; ++i) {
    joined = gcommMembershipJoin(&other, &m2);
    if (joined != gcommSuccess) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(joined, gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(gcommMembershipLeave(m2), gcommSuccess);
}

// A vote the server refuses (this member was excluded: it did not ask for the
// quorum in time), while a reducer still uses the generation's communicator (what
// the DDP wrapper holds during a step): the member gets the vote's own error, not
// "the communicator is still used" (seen in the lab's chaos run with PyTorch
// members: a frozen member woke, was refused, and was told only that). Leaving with
// the reducer alive is refused and changes nothing; once it is gone, it leaves.
TEST_F(MembershipApi, ARefusedVoteWithAReducerOnTheCommunicatorSaysWhy) {
  gcommMembershipConfig_t c = config(2, "refused");
  c.quorum_timeout_s = 0.2;
  gcommMembership_t a = nullptr;
  ASSERT_EQ(gcommMembershipJoin(&c, &a), gcommSuccess) << gcommGetLastError();
  std::string b_error;
  std::atomic<bool> b_in_generation_2{false};
  std::thread b([&] {
    gcommMembership_t m = nullptr;
    gcommComm_t comm = nullptr;
    gcommMembershipView_t view{};
    int committed = 1;
    if (gcommMembershipJoin(&c, &m) != gcommSuccess ||
        gcommMembershipQuorum(m, &comm, &view) != gcommSuccess ||
        gcommMembershipCommit(m, 0, "b's step failed", &committed) != gcommSuccess ||
        gcommMembershipQuorum(m, &comm, &view) != gcommSuccess)  // a is excluded after 0.2 s
      b_error = gcommGetLastError();
    b_in_generation_2 = true;
    if (m != nullptr) gcommMembershipLeave(m);
  });
  gcommComm_t comm = nullptr;
  gcommMembershipView_t view{};
  ASSERT_EQ(gcommMembershipQuorum(a, &comm, &view), gcommSuccess) << gcommGetLastError();
  float grad[4] = {1, 2, 3, 4};
  gcommTensor_t t{grad, 4, gcommFloat32};
  gcommReducer_t r = nullptr;
  ASSERT_EQ(gcommReducerCreate(comm, &t, 1, nullptr, &r), gcommSuccess) << gcommGetLastError();
  b.join();  // a slept through the quorum: excluded
  ASSERT_EQ(b_error, "");
  int committed = 1;
  EXPECT_EQ(gcommMembershipCommit(a, 1, nullptr, &committed), gcommInvalidState);
  const std::string why = gcommGetLastError();
  EXPECT_TRUE(has(why, "was excluded from the job")) << why;
  EXPECT_FALSE(has(why, "still used")) << why;
  EXPECT_EQ(gcommMembershipLeave(a), gcommInvalidState);
  EXPECT_TRUE(has(gcommGetLastError(), "used by 1 reducer")) << gcommGetLastError();
  EXPECT_EQ(gcommReducerDestroy(r), gcommSuccess) << gcommGetLastError();
  EXPECT_EQ(gcommMembershipLeave(a), gcommSuccess)
      << "the refused Leave changed nothing: " << gcommGetLastError();
}

// The port asked for is the port served (a server on port 0 was all that ran before).
TEST(MembershipServer, ListensOnThePortAskedFor) {
  const int port = gradcomm::test::free_tcp_port();
  gcommStoreServer_t s = nullptr;
  ASSERT_EQ(gcommStoreServerStart("127.0.0.1", port, &s), gcommSuccess) << gcommGetLastError();
  int bound = 0;
  EXPECT_EQ(gcommStoreServerPort(s, &bound), gcommSuccess);
  EXPECT_EQ(bound, port);
  gcommStoreServer_t second = nullptr;
  EXPECT_EQ(gcommStoreServerStart("127.0.0.1", port, &second), gcommInvalidArgument) << "the port is taken";
  EXPECT_EQ(second, nullptr);
  EXPECT_EQ(gcommStoreServerStop(s), gcommSuccess);
}

TEST_F(MembershipApi, NoServerIsATimeoutNamingTheAddress) {
  gcommMembershipConfig_t c = config(1);
  c.store = "127.0.0.1:1";
  c.timeout_s = 0.5;
  gcommMembership_t m = nullptr;
  EXPECT_EQ(gcommMembershipJoin(&c, &m), gcommTimeout);
  EXPECT_TRUE(has(gcommGetLastError(), "no membership server (gradcomm-store) answered at 127.0.0.1:1"))
      << gcommGetLastError();
}

}  // namespace
