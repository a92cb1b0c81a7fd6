// The cuda-ipc transport (comm/cuda_ipc/): gcommTransportAuto's question of which
// ranks share a GPU (everywhere), the refusals that need no GPU, and, on a GPU,
// separate processes on GPU 0 (gradcomm_cuda_ipc_rank) checking every collective
// and send/receive against the host reference, a rank that dies, and ranks that are
// threads of one process (refused: they are the local transport's).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "comm/job_facts.hpp"
#include "gradcomm/gradcomm.h"
#include "support/child_processes.hpp"
#include "support/free_port.hpp"
#include "support/gpu.hpp"

namespace gradcomm::test {
namespace {

using comm::gpu_sharing;
using comm::GpuPlace;
using comm::GpuSharing;

GpuSharing sharing(const std::vector<GpuPlace>& places, std::string* detail = nullptr) {
  std::string d;
  const GpuSharing s = gpu_sharing(places, d);
  if (detail != nullptr) *detail = d;
  return s;
}

TEST(GpuSharing, OneRankOrAGpuEachIsNccl) {
  EXPECT_EQ(sharing({{"h", "0000:01:00.0"}}), GpuSharing::kOwnGpus);
  EXPECT_EQ(sharing({{"h", "0000:01:00.0"}, {"h", "0000:02:00.0"}}), GpuSharing::kOwnGpus);
  // The same bus id on two hosts is two GPUs.
  EXPECT_EQ(sharing({{"a", "0000:01:00.0"}, {"b", "0000:01:00.0"}}), GpuSharing::kOwnGpus);
}

TEST(GpuSharing, EveryRankOnOneGpuIsCudaIpc) {
  EXPECT_EQ(sharing({{"h", "0000:01:00.0"}, {"h", "0000:01:00.0"}}), GpuSharing::kOneGpu);
  EXPECT_EQ(sharing(std::vector<GpuPlace>(4, {"h", "0000:01:00.0"})), GpuSharing::kOneGpu);
}

TEST(GpuSharing, SomeRanksSharingIsRefusedNamingThem) {
  std::string detail;
  EXPECT_EQ(sharing({{"h", "A"}, {"h", "B"}, {"h", "C"}, {"h", "B"}}, &detail), GpuSharing::kMixed);
  EXPECT_EQ(detail, "ranks 1 and 3 are on one GPU (B) but not every rank is");
}

TEST(CudaIpcConfig, NameAndHostDeviceRefusal) {
  EXPECT_STREQ(gcommGetTransportName(gcommTransportCudaIpc), "cuda-ipc");
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  c.rank = 0;
  c.world_size = 2;
  c.master_addr = "127.0.0.1";
  c.master_port = free_tcp_port();
  c.device = gcommHostDevice();
  c.transport = gcommTransportCudaIpc;
  c.timeout_s = 5;
  gcommComm_t comm = nullptr;
  EXPECT_EQ(gcommCommInit(&c, &comm), gcommInvalidArgument);
  EXPECT_NE(std::string(gcommGetLastError()).find("gcommTransportCudaIpc, which moves GPU memory"),
            std::string::npos)
      << gcommGetLastError();
  EXPECT_EQ(comm, nullptr);
}

// gradcomm_cuda_ipc_rank: beside this program, else where CMake built it.
std::string rank_program() {
  return program_beside_this_one("gradcomm_cuda_ipc_rank", GRADCOMM_CUDA_IPC_RANK_PROGRAM);
}

std::vector<Outcome> run_job(int n, const std::string& mode, double timeout_s, double wait_s) {
  const int port = free_tcp_port();
  ChildJob job;
  for (int r = 0; r < n; ++r) job.spawn(rank_program(), {mode}, torchrun(r, n, port, timeout_s));
  return job.wait(wait_s);
}

class CudaIpcProcesses : public ::testing::TestWithParam<int> {};

TEST_P(CudaIpcProcesses, EveryCollectiveAndSendMatchesTheHostReference) {
  GCOMM_SKIP_WITHOUT_GPU();
  const std::vector<Outcome> out = run_job(GetParam(), "collectives", 60, 240);
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ":\n" << out[r].output;
    EXPECT_TRUE(contains(out[r].output, " 0 failed")) << out[r].output;
  }
}
INSTANTIATE_TEST_SUITE_P(Ranks, CudaIpcProcesses, ::testing::Values(2, 4));

TEST(CudaIpcFailures, ARankThatDiesIsNoticedWithinTheTimeout) {
  GCOMM_SKIP_WITHOUT_GPU();
  const std::vector<Outcome> out = run_job(3, "die", 5, 60);
  EXPECT_EQ(out[1].exit_code, 3) << out[1].output;
  for (size_t r : {size_t{0}, size_t{2}}) {
    EXPECT_EQ(out[r].exit_code, 0) << "rank " << r << ":\n" << out[r].output;
    const size_t at = out[r].output.find("\nerror: ");
    ASSERT_NE(at, std::string::npos) << out[r].output;
    const std::string error = out[r].output.substr(at, out[r].output.find('\n', at + 1) - at);
    EXPECT_TRUE(contains(error, "rank 1")) << error;
    EXPECT_LT(out[r].seconds, 30.0) << "bounded by the 5 s timeout";
  }
}

TEST(CudaIpcFailures, ThreadsOfOneProcessOnOneGpuAreTheLocalTransports) {
  GCOMM_SKIP_WITHOUT_GPU();
  const int port = free_tcp_port();
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
      c.rank = r;
      c.world_size = 2;
      c.master_addr = "127.0.0.1";
      c.master_port = port;
      c.device = gcommCudaDevice(0);
      c.timeout_s = 20;
      gcommComm_t comm = nullptr;
      if (gcommCommInit(&c, &comm) == gcommSuccess) {
        gcommCommDestroy(comm);
        errors[r] = "created";
      } else {
        errors[r] = gcommGetLastError();
      }
    });
  for (auto& t : ranks) t.join();
  for (const std::string& e : errors)
    EXPECT_NE(e.find("threads of one process on one GPU"), std::string::npos) << e;
}

}  // namespace
}  // namespace gradcomm::test
