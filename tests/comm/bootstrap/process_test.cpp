// Multi-process rendezvous on loopback: ranks are separate processes
// (gradcomm_bootstrap_rank, started with posix_spawn), each told who it is through
// a launcher's environment variables, meeting at a free port. Success with 4
// ranks, a rank never started (a clear error within the timeout, naming it), a
// rank that dies after the meeting, and the C API through torchrun's, Open MPI's
// and Slurm's variables. Every child is waited for with a deadline and killed if
// it overstays: a hang fails the test instead of the CI job.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/device.hpp"
#include "support/child_processes.hpp"
#include "support/free_port.hpp"

namespace {

using gradcomm::test::contains;
using gradcomm::test::Env;
using gradcomm::test::Outcome;
using gradcomm::test::torchrun;

// gradcomm_bootstrap_rank: $GRADCOMM_RANK_PROGRAM, else beside this test program
// (binaries carried to another machine keep their folder), else where CMake built it.
std::string rank_program() {
  if (const char* env = std::getenv("GRADCOMM_RANK_PROGRAM"); env != nullptr && *env != '\0') return env;
  return gradcomm::test::program_beside_this_one("gradcomm_bootstrap_rank", GRADCOMM_RANK_PROGRAM);
}

// Children of gradcomm_bootstrap_rank, started in `mode`.
class Job : public gradcomm::test::ChildJob {
 public:
  void spawn(const std::string& mode, const Env& env) { ChildJob::spawn(rank_program(), {mode}, env); }
};

TEST(Processes, FourRanksMeetExchangeValuesAndShutDown) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  for (int r = 0; r < 4; ++r) job.spawn("store", torchrun(r, 4, port, 20));
  auto out = job.wait(30);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].output;
    EXPECT_TRUE(contains(out[r].output, "gcommSuccess: rank " + std::to_string(r) +
                                            " of 4 met at 127.0.0.1:" + std::to_string(port)))
        << out[r].output;
  }
}

TEST(Processes, ARankNeverStartedIsNamedWithinTheTimeout) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  for (int r : {0, 1, 3}) job.spawn("store", torchrun(r, 4, port, 1.5));
  auto out = job.wait(15);
  std::string expected =
      "gcommTimeout: rank 2 of 4 never connected to 127.0.0.1:" + std::to_string(port) + " within";
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].exit_code, 1) << out[i].output;
    EXPECT_TRUE(contains(out[i].output, expected)) << out[i].output;
    EXPECT_LT(out[i].seconds, 8.0) << "bounded by the 1.5 s timeout, not a hang";
  }
}

TEST(Processes, ARankThatDiesAfterTheMeetingFailsTheOthersPromptly) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  for (int r = 0; r < 3; ++r) {
    Env env = torchrun(r, 3, port, 30);
    if (r == 2) env["GRADCOMM_TEST_DIE_AFTER_MEETING"] = "1";
    job.spawn("store", env);
  }
  auto out = job.wait(20);
  EXPECT_EQ(out[2].exit_code, 3) << out[2].output;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].exit_code, 1) << out[r].output;
    EXPECT_TRUE(contains(out[r].output, "gcommRemoteError: rank 2 (")) << out[r].output;
    EXPECT_TRUE(contains(out[r].output, "lost its connection to the store")) << out[r].output;
    EXPECT_LT(out[r].seconds, 10.0) << "well before the 30 s timeout";
  }
}

// Two ranks through gcommCommInitFromEnv. What follows the rendezvous depends on
// the machine: without a GPU every rank says why it cannot go on; with one GPU,
// rank 1's LOCAL_RANK names a device that does not exist and both ranks say so;
// with two or more, the NCCL communicator is made and used.
void expect_capi_outcome(const std::vector<Outcome>& out, int port) {
  int gpus = gradcomm::cuda_device_count();
  std::string met = "all 2 ranks met at 127.0.0.1:" + std::to_string(port);
  for (int r = 0; r < 2; ++r) {
    const std::string& o = out[r].output;
    if (gpus == 0) {
      EXPECT_EQ(out[r].exit_code, 1) << o;
      EXPECT_TRUE(contains(o, "gcommNotSupported: gcommCommInitFromEnv: no usable GPU")) << o;
      EXPECT_TRUE(contains(o, "ranks in separate processes communicate through NCCL")) << o;
      EXPECT_TRUE(contains(o, met)) << o;
    } else if (gpus == 1) {
      EXPECT_EQ(out[r].exit_code, 1) << o;
      EXPECT_TRUE(contains(o, r == 1 ? "gcommInvalidArgument"
                                     : "gcommRemoteError: gcommCommInitFromEnv: rank 1 of 2 "
                                       "cannot take part"))
          << o;
      EXPECT_TRUE(contains(o, "cuda:1 is not a visible CUDA device")) << o;
    } else {
      EXPECT_EQ(out[r].exit_code, 0) << o;
    }
  }
}

TEST(Processes, CApiInitFromTorchrunVariables) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  for (int r = 0; r < 2; ++r) job.spawn("capi", torchrun(r, 2, port, 20));
  expect_capi_outcome(job.wait(60), port);
}

TEST(Processes, CApiInitFromOpenMpiVariables) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  for (int r = 0; r < 2; ++r)
    job.spawn("capi", {{"OMPI_COMM_WORLD_RANK", std::to_string(r)},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)},
                       {"MASTER_ADDR", "127.0.0.1"},
                       {"MASTER_PORT", std::to_string(port)},
                       {"GRADCOMM_TIMEOUT_S", "20"}});
  expect_capi_outcome(job.wait(60), port);
}

TEST(Processes, CApiInitFromSlurmVariables) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  for (int r = 0; r < 2; ++r)
    job.spawn("capi", {{"SLURM_PROCID", std::to_string(r)},
                       {"SLURM_NTASKS", "2"},
                       {"SLURM_LOCALID", std::to_string(r)},
                       {"SLURM_JOB_ID", "77"},
                       {"SLURM_STEP_ID", "0"},  // srun's step (without it: sbatch's script, refused)
                       {"MASTER_ADDR", "127.0.0.1"},
                       {"MASTER_PORT", std::to_string(port)},
                       {"GRADCOMM_TIMEOUT_S", "20"}});
  expect_capi_outcome(job.wait(60), port);
}

TEST(Processes, CApiInitNamesTheRankThatNeverStarted) {
  int port = gradcomm::test::free_tcp_port();
  Job job;
  job.spawn("capi", torchrun(0, 2, port, 1));
  auto out = job.wait(15);
  EXPECT_EQ(out[0].exit_code, 1) << out[0].output;
  EXPECT_TRUE(contains(
      out[0].output,
      "gcommTimeout: gcommCommInitFromEnv: rank 1 of 2 never connected to 127.0.0.1:" + std::to_string(port)))
      << out[0].output;
  EXPECT_LT(out[0].seconds, 8.0);
}

// ---- The socket transport: host ranks as separate processes ----

// Starts ranks 0..n-1 running `mode` under torchrun's variables, on the socket
// transport (auto would choose shm: they share this host) unless `transport`;
// rank `special` (if any) also gets `extra` (how and when it dies).
void spawn_world(Job& job, const std::string& mode, int n, double timeout_s, int special = -1,
                 const Env& extra = {}, const std::string& transport = "socket", const Env& every = {}) {
  const int port = gradcomm::test::free_tcp_port();
  for (int r = 0; r < n; ++r) {
    Env env = torchrun(r, n, port, timeout_s);
    env["GRADCOMM_TRANSPORT"] = transport;
    env.insert(every.begin(), every.end());
    if (r == special) env.insert(extra.begin(), extra.end());
    job.spawn(mode, env);
  }
}

TEST(Processes, HostRanksReduceAcrossProcessesOverTheSocketTransport) {
  Job job;
  spawn_world(job, "socket", 4, 30);
  auto out = job.wait(60);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].output;
    EXPECT_TRUE(contains(out[r].output,
                         "gcommSuccess: rank " + std::to_string(r) + " reduced 20 times; destroyed cleanly"))
        << out[r].output;
  }
}

// The survivors of a rank that dies fail within seconds (the timeout is 60 s),
// name the rank, and still destroy everything they made. A survivor may first
// hear of it from another survivor, whose failure notice names the dead rank.
void expect_survivors_name(const std::vector<Outcome>& out, int dead, const std::string& failed_call) {
  EXPECT_EQ(out[dead].exit_code, 4) << out[dead].output;
  for (int r = 0; r < static_cast<int>(out.size()); ++r) {
    if (r == dead) continue;
    const std::string& o = out[r].output;
    EXPECT_EQ(out[r].exit_code, 1) << o;
    EXPECT_TRUE(contains(o, "gcommRemoteError")) << o;
    EXPECT_TRUE(contains(o, "rank " + std::to_string(dead) + " closed its connection") ||
                contains(o, "rank " + std::to_string(dead) + " broke its connection"))
        << o;
    EXPECT_TRUE(contains(o, failed_call)) << o;
    EXPECT_TRUE(contains(o, "; destroyed cleanly")) << o;
    EXPECT_LT(out[r].seconds, 20.0) << "long before the 60 s timeout: " << o;
  }
}

TEST(Processes, ASocketRankThatDiesBetweenCollectivesFailsTheOthersPromptly) {
  Job job;
  spawn_world(job, "socket", 3, 60, 1, {{"GRADCOMM_TEST_DIE_AT", "5"}});
  expect_survivors_name(job.wait(90), 1, "all-reduce #5");
}

TEST(Processes, AReducerRankThatDiesBetweenStepsFailsTheOthersPromptly) {
  Job job;
  spawn_world(job, "reducer", 3, 60, 2, {{"GRADCOMM_TEST_DIE_AT", "3"}});
  expect_survivors_name(job.wait(90), 2, "all-reduce #");
}

TEST(Processes, AReducerRankThatDiesMidStepFailsTheOthersPromptly) {
  Job job;
  // Rank 0 dies after marking 3 gradients of step 2 ready: some buckets already went out.
  spawn_world(job, "reducer", 3, 60, 0,
              {{"GRADCOMM_TEST_DIE_AT", "2"}, {"GRADCOMM_TEST_DIE_AFTER_READY", "3"}});
  expect_survivors_name(job.wait(90), 0, "all-reduce #");
}

// ---- The shm transport: the same ranks over one shared segment ----

// Entries of /dev/shm that gradcomm segments hold ("gradcomm-<job>-<nonce>").
std::set<std::string> segments() {
  std::set<std::string> found;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name).rfind("gradcomm-", 0) == 0) found.insert(e->d_name);
    ::closedir(d);
  }
  return found;
}

// The segments that appeared since `before` and stay: other tests running beside
// this one (ctest -j) hold theirs only while their ranks meet.
std::set<std::string> leftovers_since(const std::set<std::string>& before) {
  std::set<std::string> left;
  for (int tries = 0; tries < 50; ++tries) {
    left.clear();
    for (const std::string& s : segments())
      if (before.count(s) == 0) left.insert(s);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return left;
}

TEST(Processes, HostRanksReduceAcrossProcessesOverTheShmTransportAndLeaveNothingInDevShm) {
  const std::set<std::string> before = segments();
  Job job;
  spawn_world(job, "socket", 4, 30, -1, {}, "shm");
  auto out = job.wait(60);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].output;
    EXPECT_TRUE(contains(out[r].output,
                         "gcommSuccess: rank " + std::to_string(r) + " reduced 20 times; destroyed cleanly"))
        << out[r].output;
  }
  EXPECT_EQ(leftovers_since(before), std::set<std::string>{});
}

// A rank whose process ends without a word (exit, SIGKILL) is named by the
// survivors within a second or so (they check their peers' processes while
// they wait), not at the 60 s timeout; the segment's name was gone since init.
void expect_shm_survivors_name(const std::vector<Outcome>& out, int dead, int dead_code) {
  EXPECT_EQ(out[dead].exit_code, dead_code) << out[dead].output;
  for (int r = 0; r < static_cast<int>(out.size()); ++r) {
    if (r == dead) continue;
    const std::string& o = out[r].output;
    EXPECT_EQ(out[r].exit_code, 1) << o;
    EXPECT_TRUE(contains(o, "gcommRemoteError")) << o;
    EXPECT_TRUE(contains(o, "rank " + std::to_string(dead) + " is gone (its process exited or was killed)"))
        << o;
    EXPECT_TRUE(contains(o, "all-reduce #5")) << o;
    EXPECT_TRUE(contains(o, "; destroyed cleanly")) << o;
    EXPECT_LT(out[r].seconds, 20.0) << "long before the 60 s timeout: " << o;
  }
}

TEST(Processes, AnShmRankThatExitsOrIsKilledIsNamedPromptly) {
  const std::set<std::string> before = segments();
  // Rank 0 killed too: it created the segment, and no destructor of its runs.
  for (const auto& [how, code, who] :
       {std::tuple<const char*, int, int>{"GRADCOMM_TEST_DIE_AT", 4, 1},
        std::tuple<const char*, int, int>{"GRADCOMM_TEST_KILL_AT", 128 + SIGKILL, 1},
        std::tuple<const char*, int, int>{"GRADCOMM_TEST_KILL_AT", 128 + SIGKILL, 0}}) {
    SCOPED_TRACE(std::string(how) + " on rank " + std::to_string(who));
    Job job;
    spawn_world(job, "socket", 3, 60, who, {{how, "5"}}, "shm");
    expect_shm_survivors_name(job.wait(90), who, code);
  }
  EXPECT_EQ(leftovers_since(before), std::set<std::string>{});
}

// Issue 44 #6: a peer killed during an all-reduce larger than its ring (32 MiB:
// the survivors are in the middle of sending to it) is named within a few
// hundred milliseconds. Before, each survivor spent a further second trying to
// finish the message it was writing into the dead peer's ring (1.10-1.12 s).
TEST(Processes, AnShmRankKilledInALargeAllReduceIsNamedPromptly) {
  for (int who : {1, 0}) {
    SCOPED_TRACE("rank " + std::to_string(who) + " killed");
    Job job;
    spawn_world(job, "socket", 3, 60, who, {{"GRADCOMM_TEST_KILL_AT", "3"}}, "shm",
                {{"GRADCOMM_TEST_COUNT", std::to_string((32 << 20) / 4)}});
    auto out = job.wait(90);
    EXPECT_EQ(out[who].exit_code, 128 + SIGKILL) << out[who].output;
    for (int r = 0; r < 3; ++r) {
      if (r == who) continue;
      const std::string& o = out[r].output;
      EXPECT_EQ(out[r].exit_code, 1) << o;
      EXPECT_TRUE(contains(o, "all-reduce #3")) << o;
      const size_t at = o.find("[the call failed after ");
      ASSERT_NE(at, std::string::npos) << o;
      const double took = std::atof(o.c_str() + at + std::strlen("[the call failed after "));
      // The peers' processes are looked at every 100 ms while a survivor waits.
      EXPECT_LT(took, 0.8) << o;
    }
  }
}

TEST(Processes, AStoppedShmRankIsNamedAtTheTimeout) {
  Job job;
  spawn_world(job, "socket", 3, 3, 2, {{"GRADCOMM_TEST_STOP_AT", "5"}}, "shm");
  auto out = job.wait(10);  // rank 2 stays stopped: killed when the wait ends
  for (int r = 0; r < 2; ++r) {
    const std::string& o = out[r].output;
    EXPECT_EQ(out[r].exit_code, 1) << o;
    // One survivor times out waiting for rank 2; the other may hear of it from that one first.
    EXPECT_TRUE(contains(o, "waiting for data from rank 2") || contains(o, "failed: all-reduce #5")) << o;
    EXPECT_LT(out[r].seconds, 20.0) << o;
  }
}

TEST(Processes, ReducerRanksAverageAcrossProcesses) {
  for (const char* transport : {"socket", "shm"}) {
    SCOPED_TRACE(transport);
    Job job;
    spawn_world(job, "reducer", 3, 30, -1, {}, transport);
    auto out = job.wait(60);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ": " << out[r].output;
      EXPECT_TRUE(contains(out[r].output, "finished 6 steps; destroyed cleanly")) << out[r].output;
    }
  }
}

}  // namespace
