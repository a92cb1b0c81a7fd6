// Training through failures with real processes: gradcomm-store in a process of
// its own and members running examples/ft_train.c, one of which is killed
// (SIGKILL) or frozen (SIGSTOP) by its own hand at a chosen step and rank. The
// survivors must finish every step with identical parameters (the hash each
// prints), each failure costing one discarded step; a frozen member must be
// refused when it wakes; a restarted process must join and end identical too.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/child_processes.hpp"

namespace {

using gradcomm::test::contains;
using gradcomm::test::Env;
using gradcomm::test::Outcome;

std::string store_program() {
  return gradcomm::test::program_beside_this_one("gradcomm-store", GRADCOMM_STORE_PROGRAM);
}
std::string member_program() {
  return gradcomm::test::program_beside_this_one("gradcomm_example_ft", GRADCOMM_FT_PROGRAM);
}

// gradcomm-store on a free port, killed when the test ends.
class Store {
 public:
  Store() {
    char path[] = "/tmp/gradcomm_store_port_XXXXXX";
    int fd = ::mkstemp(path);
    ::close(fd);
    ::unlink(path);
    port_file_ = path;
    job_ = std::make_unique<gradcomm::test::ChildJob>();
    job_->spawn(store_program(), {"--port", "0", "--port-file", port_file_}, {});
    for (int i = 0; i < 1000 && port_ == 0; ++i) {
      std::ifstream in(port_file_);
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Store() { ::unlink(port_file_.c_str()); }
  int port() const { return port_; }
  void kill() { job_.reset(); }  // SIGKILL
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::unique_ptr<gradcomm::test::ChildJob> job_;  // its destructor kills the store
  std::string port_file_;
  int port_ = 0;
};

struct Final {
  int rank = -1;
  unsigned long long steps = 0;
  std::string params;
  int failures_survived = -1;
  int discarded = -1;
};

// The last line of a member that finished.
bool parse_final(const std::string& output, Final& f) {
  static const std::regex line(
      R"(rank (\d+) of \d+: committed (\d+) steps, loss [0-9.e+-]+, params ([0-9a-f]+), generations \d+, failures survived (\d+), steps discarded (\d+))");
  std::smatch m;
  if (!std::regex_search(output, m, line)) return false;
  f.rank = std::stoi(m[1]);
  f.steps = std::stoull(m[2]);
  f.params = m[3];
  f.failures_survived = std::stoi(m[4]);
  f.discarded = std::stoi(m[5]);
  return true;
}

Env member_env(const Store& store, double timeout_s) {
  return Env{{"GRADCOMM_STORE", store.address()},
             {"GRADCOMM_TIMEOUT_S", std::to_string(timeout_s)},
             {"GRADCOMM_JOB_KEY", "ft-test"}};
}

std::vector<std::string> member_args(int min_ranks, int steps, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "--min-ranks", std::to_string(min_ranks), "--steps", std::to_string(steps), "--step-ms", "2", "--check",
      "10"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Every member that finished did all `steps`, with one parameter hash.
void expect_survivors_agree(const std::vector<Outcome>& out, size_t expected_survivors,
                            unsigned long long steps) {
  std::set<std::string> hashes;
  size_t finished = 0;
  for (const Outcome& o : out) {
    Final f;
    if (o.exit_code != 0) continue;
    ASSERT_TRUE(parse_final(o.output, f)) << o.output;
    ++finished;
    EXPECT_EQ(f.steps, steps) << o.output;
    hashes.insert(f.params);
  }
  EXPECT_EQ(finished, expected_survivors);
  EXPECT_EQ(hashes.size(), 1u) << "the survivors' parameters differ";
}

// Runs `n` members with `flags` (plus, after `late_ms`, `late` more: restarts)
// and waits for them.
std::vector<Outcome> run_members(const Store& store, int n, int min_ranks, int steps,
                                 const std::vector<std::string>& flags, int late = 0, int late_ms = 0,
                                 double timeout_s = 20) {
  gradcomm::test::ChildJob members;
  for (int i = 0; i < n; ++i)
    members.spawn(member_program(), member_args(min_ranks, steps, flags), member_env(store, timeout_s));
  if (late > 0) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
  for (int i = 0; i < late; ++i)
    members.spawn(member_program(), member_args(min_ranks, steps, flags), member_env(store, timeout_s));
  return members.wait(90);
}

int killed(const std::vector<Outcome>& out) {
  int n = 0;
  for (const Outcome& o : out) n += o.exit_code == 128 + SIGKILL ? 1 : 0;
  return n;
}

TEST(MembershipProcesses, KillingRankZeroCostsOneStepAndTheSurvivorsFinishIdentical) {
  Store store;
  ASSERT_GT(store.port(), 0) << "gradcomm-store did not start";
  auto out = run_members(store, 3, 3, 60, {"--transport", "shm", "--die", "20:0"});
  for (const Outcome& o : out) {
    if (o.exit_code == 128 + SIGKILL) continue;
    EXPECT_EQ(o.exit_code, 0) << o.output;
    Final f;
    ASSERT_TRUE(parse_final(o.output, f)) << o.output;
    EXPECT_EQ(f.failures_survived, 1) << o.output;
    EXPECT_EQ(f.discarded, 1) << "one failure, one step discarded\n" << o.output;
    EXPECT_TRUE(contains(o.output, "generation 2: rank ")) << o.output;
    EXPECT_TRUE(contains(o.output, "lost its connection to the store: did its process die?")) << o.output;
    EXPECT_LT(o.seconds, 15.0) << "a kill is seen at once, not at the 20 s timeout";
  }
  EXPECT_EQ(killed(out), 1);
  expect_survivors_agree(out, 2, 60);
}

TEST(MembershipProcesses, AFrozenRankIsExcludedAndRefusedWhenItWakesWhileANewcomerJoins) {
  Store store;
  ASSERT_GT(store.port(), 0) << "gradcomm-store did not start";
  // A fourth process, as a restart policy would start one, once rank 2 froze
  // (step 15): it waits for the next step boundary, joins and takes the parameters.
  auto out = run_members(store, 3, 3, 80,
                         {"--transport", "socket", "--quorum-timeout", "1", "--freeze", "15:2:4"}, 1, 400, 2);
  int refused = 0;
  for (const Outcome& o : out) {
    if (contains(o.output, "freezes for")) {
      ++refused;
      EXPECT_EQ(o.exit_code, 4) << o.output;
      EXPECT_TRUE(contains(o.output, "was excluded from the job at generation")) << o.output;
      EXPECT_TRUE(contains(o.output, "cannot take part in a later step")) << o.output;
      continue;
    }
    EXPECT_EQ(o.exit_code, 0) << o.output;
  }
  if (::testing::Test::HasFailure())
    for (const Outcome& o : out) std::cerr << "---- exit " << o.exit_code << "\n" << o.output;
  EXPECT_EQ(refused, 1);
  expect_survivors_agree(out, 3, 80);
}

TEST(MembershipProcesses, ARestartedRankJoinsTheRunningJobAndEndsIdentical) {
  Store store;
  ASSERT_GT(store.port(), 0) << "gradcomm-store did not start";
  auto out = run_members(store, 3, 3, 400, {"--die", "10:1"}, 1, 500);  // the fourth: the restart
  const Outcome& restarted = out[3];
  EXPECT_EQ(restarted.exit_code, 0) << restarted.output;
  EXPECT_TRUE(contains(restarted.output, " joined")) << restarted.output;
  Final f;
  ASSERT_TRUE(parse_final(restarted.output, f)) << restarted.output;
  EXPECT_EQ(f.failures_survived, 0) << "it joined; it survived nothing";
  expect_survivors_agree(out, 3, 400);
}

TEST(MembershipProcesses, TwoRanksDyingInOneStepCostThatStepOnly) {
  Store store;
  ASSERT_GT(store.port(), 0);
  auto out = run_members(store, 4, 4, 60, {"--die", "20:1", "--die", "20:2"});
  EXPECT_EQ(killed(out), 2);
  for (const Outcome& o : out) {
    Final f;
    if (o.exit_code != 0) continue;
    ASSERT_TRUE(parse_final(o.output, f)) << o.output;
    EXPECT_LE(f.discarded, 2) << o.output;
    EXPECT_GE(f.failures_survived, 1) << o.output;
  }
  expect_survivors_agree(out, 2, 60);
}

TEST(MembershipProcesses, EveryRankButOneDyingLeavesOneThatFinishesAlone) {
  Store store;
  ASSERT_GT(store.port(), 0);
  auto out = run_members(store, 3, 3, 60, {"--die", "20:0", "--die", "20:2"});
  EXPECT_EQ(killed(out), 2);
  for (const Outcome& o : out)
    if (o.exit_code == 0) {
      EXPECT_TRUE(contains(o.output, "rank 0 of 1: committed 60 steps")) << o.output;
    }
  expect_survivors_agree(out, 1, 60);
}

TEST(MembershipProcesses, ARankKilledInsideALargeAllReduceCostsThatStep) {
  Store store;
  ASSERT_GT(store.port(), 0);
  auto out = run_members(store, 3, 3, 16, {"--transport", "shm", "--payload", "32", "--die-during", "8:1"});
  EXPECT_EQ(killed(out), 1);
  for (const Outcome& o : out) {
    Final f;
    if (o.exit_code != 0) continue;
    ASSERT_TRUE(parse_final(o.output, f)) << o.output;
    EXPECT_EQ(f.discarded, 1) << o.output;
    EXPECT_TRUE(contains(o.output, "discarded (gcommAllReduce: all-reduce #17 of 33554432 bytes: ") &&
                contains(o.output, "rank 1 is gone"))
        << "the kill lands inside the large all-reduce\n"
        << o.output;
  }
  expect_survivors_agree(out, 2, 16);
}

TEST(MembershipProcesses, ANewcomerDyingAsItCatchesUpLeavesTheOthersGoingOn) {
  Store store;
  ASSERT_GT(store.port(), 0);
  auto out = run_members(store, 2, 2, 400, {"--step-ms", "4", "--die-syncing", "2"}, 1, 300);
  EXPECT_EQ(out[2].exit_code, 128 + SIGKILL) << out[2].output;
  EXPECT_TRUE(contains(out[2].output, "rank 2 dies as it brings the newcomers up to date")) << out[2].output;
  expect_survivors_agree(out, 2, 400);
}

TEST(MembershipProcesses, AHolderDyingAsItSendsTheStateLeavesTheNewcomerWithTheOther) {
  Store store;
  ASSERT_GT(store.port(), 0);
  // 8 MiB of state: chunks from both holders, so the newcomer's catch-up is cut
  // half-way; it must receive the state again from the holder that lives, not be
  // counted a holder of the half it has (the divergence check every 10 steps, over
  // that state too, would end it with exit 5).
  auto out =
      run_members(store, 2, 2, 400,
                  {"--step-ms", "4", "--die-syncing", "1", "--state-mib", "8", "--check", "10"}, 1, 300);
  EXPECT_EQ(killed(out), 1);
  EXPECT_EQ(out[2].exit_code, 0) << "the newcomer gets the state from the holder that lives\n"
                                 << out[2].output;
  EXPECT_TRUE(contains(out[2].output, "from 1 holder")) << "it is brought up to date again\n"
                                                        << out[2].output;
  expect_survivors_agree(out, 2, 400);
}

TEST(MembershipProcesses, TheStoreStoppingEndsEveryMemberWithAClearError) {
  Store store;
  ASSERT_GT(store.port(), 0);
  gradcomm::test::ChildJob members;
  for (int i = 0; i < 3; ++i)
    members.spawn(member_program(), member_args(3, 100000, {"--step-ms", "2"}), member_env(store, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  store.kill();
  auto out = members.wait(30);
  for (const Outcome& o : out) {
    EXPECT_EQ(o.exit_code, 4) << o.output;
    EXPECT_TRUE(contains(o.output, "closed the connection (did gradcomm-store stop?)")) << o.output;
  }
}

}  // namespace
