// gcommCommInit and gcommCommInitFromEnv through the shared library, as an
// embedder calls them: argument checks with clear messages (the out-pointer left
// as it was), environment parsing errors, the timeout naming a rank that never
// came, and a world of one (the whole path, the NCCL communicator included, on a
// machine with a GPU; the rendezvous and a clear gcommNotSupported without one).
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gradcomm/gradcomm.h"
#include "support/free_port.hpp"
#include "support/gpu.hpp"

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

gcommComm_t sentinel() {
  return reinterpret_cast<gcommComm_t>(static_cast<uintptr_t>(0x5e17));
}

// Sets variables for one test and restores the previous values (tests run on one thread).
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                             "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "GRADCOMM_JOB_KEY"})
      set(name, nullptr);
    for (const auto& [k, v] : vars) set(k, v.c_str());
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  void set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

gcommCommConfig_t world_of_one() {
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  c.rank = 0;
  c.world_size = 1;
  c.device = gcommCudaDevice(0);
  c.timeout_s = 20;
  return c;
}

// gcommCommInit refuses `c` with `status`; the message contains `part`; *out untouched.
void expect_refused(const gcommCommConfig_t* c, gcommStatus_t status, const std::string& part) {
  gcommComm_t out = sentinel();
  EXPECT_EQ(gcommCommInit(c, &out), status) << gcommGetLastError();
  EXPECT_TRUE(contains(gcommGetLastError(), part)) << gcommGetLastError();
  EXPECT_EQ(out, sentinel());
}

TEST(CommInitApi, RefusesNullAndMalformedArguments) {
  gcommCommConfig_t c = world_of_one();
  EXPECT_EQ(gcommCommInit(&c, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "gcommCommInit: argument 'comm' must not be NULL"))
      << gcommGetLastError();
  expect_refused(nullptr, gcommInvalidArgument, "argument 'config' must not be NULL");
  EXPECT_EQ(gcommCommInitFromEnv(nullptr, nullptr), gcommInvalidArgument);
  EXPECT_TRUE(contains(gcommGetLastError(), "gcommCommInitFromEnv: argument 'comm'")) << gcommGetLastError();
  gcommCommConfig_t raw;
  std::memset(&raw, 0, sizeof(raw));
  expect_refused(&raw, gcommInvalidArgument, "was not made by its _INITIALIZER macro");
}

TEST(CommInitApi, ExplicitValuesAreChecked) {
  gcommCommConfig_t c = world_of_one();
  c.rank = 1;
  expect_refused(&c, gcommInvalidArgument, "config.rank=1 is not below config.world_size=1");
  c = world_of_one();
  c.world_size = 2;
  c.rank = 1;
  expect_refused(&c, gcommInvalidArgument, "config.master_addr is required when world_size > 1");
  c.master_addr = "127.0.0.1";
  expect_refused(&c, gcommInvalidArgument, "config.master_port is required");
  c = world_of_one();
  c.transport = gcommTransportLocal;
  expect_refused(&c, gcommInvalidArgument, "gcommCommInitLocal");
  c = world_of_one();
  c.device = gcommHostDevice();
  c.transport = gcommTransportNccl;
  expect_refused(&c, gcommNotSupported,
                 "config.transport is gcommTransportNccl but config.device is the host");
  c = world_of_one();
  c.transport = gcommTransportSocket;
  expect_refused(&c, gcommInvalidArgument, "gcommTransportSocket, which moves host memory");
  c = world_of_one();
  c.rank = -1;
  expect_refused(&c, gcommInvalidArgument, "config.rank is required");
}

TEST(CommInitApi, EnvironmentErrorsNameTheVariable) {
  gcommComm_t out = sentinel();
  {
    ScopedEnv env({{"RANK", "abc"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
    EXPECT_EQ(gcommCommInitFromEnv(nullptr, &out), gcommInvalidArgument);
    EXPECT_TRUE(contains(gcommGetLastError(), "RANK='abc' (torchrun) is not an integer"))
        << gcommGetLastError();
  }
  {
    ScopedEnv env({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
    EXPECT_EQ(gcommCommInitFromEnv(nullptr, &out), gcommInvalidArgument);
    EXPECT_TRUE(contains(gcommGetLastError(), "RANK=2 is not below WORLD_SIZE=2")) << gcommGetLastError();
  }
  {
    ScopedEnv env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}});
    EXPECT_EQ(gcommCommInitFromEnv(nullptr, &out), gcommInvalidArgument);
    EXPECT_TRUE(contains(gcommGetLastError(), "MASTER_ADDR is not set")) << gcommGetLastError();
  }
  {
    ScopedEnv env({});
    EXPECT_EQ(gcommCommInitFromEnv(nullptr, &out), gcommInvalidArgument);
    EXPECT_TRUE(contains(gcommGetLastError(), "no rank")) << gcommGetLastError();
  }
  EXPECT_EQ(out, sentinel());
}

TEST(CommInitApi, ARankThatNeverComesIsNamedWithinTheTimeout) {
  gcommCommConfig_t c = world_of_one();
  int port = gradcomm::test::free_tcp_port();
  c.world_size = 3;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout_s = 0.5;
  gcommComm_t out = sentinel();
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(gcommCommInit(&c, &out), gcommTimeout) << gcommGetLastError();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // "within S s": the time since the store started, at least the timeout (a late
  // wake-up reads 0.6, so the number is checked, not its text).
  const std::string error = gcommGetLastError();
  const std::string named =
      "gcommCommInit: ranks 1, 2 of 3 never connected to 127.0.0.1:" + std::to_string(port) + " within ";
  const size_t at = error.find(named);
  ASSERT_NE(at, std::string::npos) << error;
  const double within = std::strtod(error.c_str() + at + named.size(), nullptr);
  EXPECT_GE(within, 0.5) << error;
  EXPECT_LT(within, 3.0) << error;
  EXPECT_LT(seconds, 3.0);
  EXPECT_EQ(out, sentinel());
}

// The whole path for a world of one: store on loopback, meeting, unique id, NCCL.
void expect_world_of_one(gcommStatus_t s, gcommComm_t comm, const char* function) {
  if (!gradcomm::gpu_available()) {
    EXPECT_EQ(s, gcommNotSupported) << gcommGetLastError();
    EXPECT_TRUE(contains(gcommGetLastError(), std::string(function) + ": no usable GPU"))
        << gcommGetLastError();
    EXPECT_TRUE(
        contains(gcommGetLastError(), "The rendezvous itself worked: the single rank met at 127.0.0.1:"))
        << gcommGetLastError();
    return;
  }
  ASSERT_EQ(s, gcommSuccess) << gcommGetLastError();
  int size = 0;
  gcommTransport_t kind;
  EXPECT_EQ(gcommCommSize(comm, &size), gcommSuccess);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(gcommCommTransport(comm, &kind), gcommSuccess);
  EXPECT_EQ(kind, gcommTransportNccl);
  std::vector<float> h(1000, 2.5f), back(1000, 0.0f);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, h.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(gcommAllReduce(comm, d, d, h.size(), gcommFloat32, gcommSum, nullptr), gcommSuccess)
      << gcommGetLastError();
  EXPECT_EQ(gcommCommSynchronize(comm), gcommSuccess) << gcommGetLastError();
  ASSERT_EQ(cudaMemcpy(back.data(), d, h.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, h);
  cudaFree(d);
  EXPECT_EQ(gcommCommDestroy(comm), gcommSuccess) << gcommGetLastError();
}

TEST(CommInitApi, AWorldOfOneThroughExplicitValues) {
  gcommCommConfig_t c = world_of_one();
  gcommComm_t comm = nullptr;
  gcommStatus_t s = gcommCommInit(&c, &comm);
  expect_world_of_one(s, comm, "gcommCommInit");
}

TEST(CommInitApi, AWorldOfOneFromTheEnvironment) {
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  gcommComm_t comm = nullptr;
  gcommStatus_t s = gcommCommInitFromEnv(nullptr, &comm);
  expect_world_of_one(s, comm, "gcommCommInitFromEnv");
}

// A host device means the socket transport, on any machine.
TEST(CommInitApi, AWorldOfOneOnTheHost) {
  gcommCommConfig_t c = world_of_one();
  c.device = gcommHostDevice();
  gcommComm_t comm = nullptr;
  ASSERT_EQ(gcommCommInit(&c, &comm), gcommSuccess) << gcommGetLastError();
  gcommTransport_t kind;
  EXPECT_EQ(gcommCommTransport(comm, &kind), gcommSuccess);
  EXPECT_EQ(kind, gcommTransportShm)
      << "the table's first host entry that serves one host (a segment of a few KiB)";
  std::vector<float> x(100, 1.5f), y(100, 0.0f);
  EXPECT_EQ(gcommAllReduce(comm, x.data(), y.data(), x.size(), gcommFloat32, gcommAvg, nullptr), gcommSuccess)
      << gcommGetLastError();
  EXPECT_EQ(y, x);
  EXPECT_EQ(gcommCommDestroy(comm), gcommSuccess) << gcommGetLastError();
}

// Rank r of a job of two meeting on loopback at `port`.
gcommCommConfig_t rank_of_two(int r, int port, const char* job_key, double timeout_s) {
  gcommCommConfig_t c = world_of_one();
  c.rank = r;
  c.world_size = 2;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.job_key = job_key;
  c.timeout_s = timeout_s;
  return c;
}

TEST(CommInitApi, TwoRanksOfOneProcessMeetThroughTheCApi) {
  if (gradcomm::gpu_available())
    GTEST_SKIP()
        << "checks the rendezvous and the no-GPU answer; with a GPU, two NCCL ranks of one process would "
           "share it (the multi-process tests cover GPUs)";
  int port = gradcomm::test::free_tcp_port();
  std::vector<std::string> errors(2);
  std::vector<gcommStatus_t> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      gcommCommConfig_t c = rank_of_two(r, port, "two-ranks", 10);
      gcommComm_t comm = nullptr;
      status[r] = gcommCommInit(&c, &comm);
      errors[r] = gcommGetLastError();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r], gcommNotSupported) << errors[r];
    EXPECT_TRUE(contains(errors[r], "all 2 ranks met at 127.0.0.1:" + std::to_string(port))) << errors[r];
  }
}

// Closing a communicator and making the next on the same port, 20 times, with the
// ranks out of step (one still in the shutdown while the other makes the next): each
// communicator's ranks meet each other, never a rank of the one before or after.
// Failed before generations: "lost its connection to the store during hello".
TEST(CommInitApi, CommunicatorsMadeOneAfterAnotherOnOnePortMeetTheirOwnRanks) {
  const int port = gradcomm::test::free_tcp_port();
  std::vector<std::string> errors(2);
  std::vector<std::vector<float>> sums(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      for (int cycle = 0; cycle < 20 && errors[r].empty(); ++cycle) {
        if ((cycle + r) % 3 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * (r + 1)));
        gcommCommConfig_t c = rank_of_two(r, port, "one-after-another", 20);
        c.device = gcommHostDevice();
        gcommComm_t comm = nullptr;
        float value = static_cast<float>(cycle * 10 + r);
        if (gcommCommInit(&c, &comm) != gcommSuccess ||
            gcommAllReduce(comm, &value, &value, 1, gcommFloat32, gcommSum, nullptr) != gcommSuccess ||
            gcommCommDestroy(comm) != gcommSuccess) {
          errors[r] = "cycle " + std::to_string(cycle) + ": " + gcommGetLastError();
          break;
        }
        sums[r].push_back(value);
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(sums[r].size(), 20u) << "rank " << r;
    for (int cycle = 0; cycle < 20; ++cycle) EXPECT_EQ(sums[r][cycle], 20.0f * cycle + 1) << cycle;
  }
}

// Issue 44 #4: an init that failed made no communicator, so it counts for no
// generation: a rank that retries in its process after a failure meets its peers.
// Rank 1 first fails alone (nobody listens), or rank 0 fails twice alone (nobody
// comes); then both start and the lone rank retries. Failed before: rank 1 "found
// only an earlier communicator's store ... (generation 0, rank 1's is 1)", and rank 0
// blamed "rank 1 of 2 never connected" although it had; with rank 0's two
// failures, rank 1 was refused: "communicator #1 ... rank 0 its #3".
TEST(CommInitApi, ARetryAfterAFailedInitMeetsItsPeers) {
  for (int lone : {1, 0}) {
    SCOPED_TRACE("rank " + std::to_string(lone) + " failed alone first");
    const int port = gradcomm::test::free_tcp_port();
    for (int attempt = 0; attempt < (lone == 0 ? 2 : 1); ++attempt) {
      gcommCommConfig_t c = rank_of_two(lone, port, "retry", 0.5);
      c.device = gcommHostDevice();
      gcommComm_t comm = nullptr;
      EXPECT_EQ(gcommCommInit(&c, &comm), gcommTimeout) << gcommGetLastError();
      EXPECT_EQ(comm, nullptr);
    }
    std::vector<std::string> errors(2);
    std::vector<float> sums(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        gcommCommConfig_t c = rank_of_two(r, port, "retry", 8);
        c.device = gcommHostDevice();
        gcommComm_t comm = nullptr;
        float value = static_cast<float>(r + 1);
        if (gcommCommInit(&c, &comm) != gcommSuccess ||
            gcommAllReduce(comm, &value, &value, 1, gcommFloat32, gcommSum, nullptr) != gcommSuccess) {
          errors[r] = gcommGetLastError();
        }
        if (comm != nullptr && gcommCommDestroy(comm) != gcommSuccess && errors[r].empty())
          errors[r] = gcommGetLastError();
        sums[r] = value;
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(errors[r], "") << "rank " << r;
      EXPECT_EQ(sums[r], 3.0f) << "rank " << r;
    }
  }
}

// Issue 44 #11: the cuda-ipc transport asked for on a machine without a GPU is
// refused at once, before the rendezvous (no rank can ever serve it there),
// naming the transport; before, it waited for the other ranks and then spoke of
// NCCL and the socket transport.
TEST(CommInitApi, CudaIpcWithoutAGpuIsRefusedBeforeTheRendezvousNamingIt) {
  if (gradcomm::gpu_available()) GTEST_SKIP() << "checks the answer on a machine without a GPU";
  gcommCommConfig_t c = rank_of_two(0, gradcomm::test::free_tcp_port(), "no-gpu", 20);
  c.device = gcommCudaDevice(0);
  c.transport = gcommTransportCudaIpc;
  gcommComm_t comm = sentinel();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(gcommCommInit(&c, &comm), gcommNotSupported) << gcommGetLastError();
  const std::string error = gcommGetLastError();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0)
      << "not after the 20 s wait for rank 1";
  EXPECT_TRUE(contains(error, "cuda-ipc")) << error;
  EXPECT_TRUE(contains(error, "no usable GPU")) << error;
  EXPECT_FALSE(contains(error, "NCCL")) << error;
  EXPECT_EQ(comm, sentinel());
}

}  // namespace
