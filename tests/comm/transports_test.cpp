// The transport table (comm/transports.hpp): what a store-met rank may ask for, and
// gcommTransportAuto's choice from made-up facts of a job (hosts, PID namespaces,
// GPUs, NCCL), with GPUs or without.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "comm/nccl/nccl_job.hpp"
#include "comm/transports.hpp"
#include "common/error.hpp"
#include "gradcomm/gradcomm.h"

namespace gradcomm::comm {
namespace {

// The refusal of `requested` on `device` before anything is done ("(accepted)" if none).
std::string refusal(gcommTransport_t requested, const gcommDevice_t& device,
                    gcommStatus_t status = gcommInvalidArgument) {
  try {
    requested_transport(requested, device);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.message();
    return e.message();
  }
  return "(accepted)";
}

TEST(Transports, WhatIsAskedForIsCheckedAgainstTheDevice) {
  EXPECT_EQ(requested_transport(gcommTransportAuto, gcommCudaDevice(1)), nullptr);
  EXPECT_EQ(requested_transport(gcommTransportAuto, gcommHostDevice()), nullptr);
  EXPECT_EQ(requested_transport(gcommTransportCudaIpc, gcommCudaDevice(0))->kind, gcommTransportCudaIpc);
  EXPECT_NE(refusal(gcommTransportCudaIpc, gcommHostDevice()).find("which moves GPU memory"),
            std::string::npos);
  EXPECT_EQ(requested_transport(gcommTransportShm, gcommHostDevice())->kind, gcommTransportShm);
  EXPECT_EQ(requested_transport(gcommTransportSocket, gcommHostDevice())->kind, gcommTransportSocket);
  EXPECT_EQ(requested_transport(gcommTransportNccl, gcommCudaDevice(0))->kind, gcommTransportNccl);
  EXPECT_NE(
      refusal(gcommTransportNccl, gcommHostDevice(), gcommNotSupported).find("NCCL needs a CUDA device"),
      std::string::npos);
  EXPECT_NE(refusal(gcommTransportSocket, gcommCudaDevice(0)).find("set config.device to gcommHostDevice()"),
            std::string::npos);
  EXPECT_NE(refusal(gcommTransportLocal, gcommHostDevice()).find("create them with gcommCommInitLocal"),
            std::string::npos);
  EXPECT_NE(refusal(static_cast<gcommTransport_t>(77), gcommHostDevice())
                .find("must be one of gcommTransportAuto, gcommTransportNccl, gcommTransportCudaIpc, "
                      "gcommTransportShm, gcommTransportSocket"),
            std::string::npos);
}

// Made-up facts: `n` ranks, each on `hosts[r % size]` in `pidns`, on `gpus[r % size]`
// ("" for host ranks), each its own process.
JobFacts job_of(int n, std::vector<std::string> hosts, std::vector<std::string> gpus = {},
                std::vector<uint64_t> pid_namespaces = {1}) {
  JobFacts job;
  for (int r = 0; r < n; ++r) {
    RankFacts f;
    f.device_kind = gpus.empty() ? gcommDeviceHost : gcommDeviceCuda;
    f.host = hosts[r % hosts.size()];
    f.pid_namespace = pid_namespaces[r % pid_namespaces.size()];
    f.pid = 1000 + r;
    if (!gpus.empty()) f.gpu = gpus[r % gpus.size()];
    job.ranks.push_back(f);
  }
  return job;
}

// The names of auto's candidates for `job`, in order ("" when none).
std::string candidates(const JobFacts& job, std::string* why_not = nullptr) {
  std::string names;
  for (const TransportEntry* t : transports_for_job(job, why_not))
    names += (names.empty() ? "" : ",") + std::string(t->name);
  return names;
}

// Issue 45 part 1: gcommTransportAuto takes the first entry of the table that can
// serve the job, each answering from the facts alone (no selector beside the table).
TEST(Transports, AutoTakesTheFirstEntryThatCanServeTheJob) {
  EXPECT_EQ(candidates(job_of(3, {"h b"})), "shm,socket");
  EXPECT_EQ(candidates(job_of(1, {"h b"})), "shm,socket");
  EXPECT_EQ(candidates(job_of(4, {"h b", "g b"})), "socket");
  std::string why;
  EXPECT_EQ(candidates(job_of(2, {"h b"}, {}, {1, 2}), &why), "socket");
  EXPECT_NE(why.find("shm: rank 1 in another PID namespace"), std::string::npos) << why;
  EXPECT_EQ(candidates(job_of(4, {"h b"}, {"GPU-0", "GPU-1", "GPU-2", "GPU-3"})), "nccl");
  EXPECT_EQ(candidates(job_of(4, {"h b"}, {"GPU-0"})), "cuda-ipc");
  EXPECT_EQ(candidates(job_of(2, {"a b", "c d"}, {"GPU-0"})), "nccl") << "one UUID on two hosts is two GPUs";
  EXPECT_EQ(candidates(job_of(1, {"h b"}, {"GPU-0"})), "nccl");
}

TEST(Transports, AJobNoTransportCanServeSaysWhatEachEntryMisses) {
  std::string why;
  // Ranks 0 and 2 share a GPU, 1 and 3 have their own.
  EXPECT_EQ(candidates(job_of(4, {"h b"}, {"GPU-0", "GPU-1", "GPU-0", "GPU-3"}), &why), "");
  EXPECT_NE(why.find("nccl: it needs a GPU per rank, and ranks 0 and 2 are on one GPU (GPU-0)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("cuda-ipc: it needs every rank on one GPU"), std::string::npos) << why;
  // Threads of one process on one GPU: the local transport's.
  JobFacts threads = job_of(2, {"h b"}, {"GPU-0"});
  threads.ranks[1].pid = threads.ranks[0].pid;
  why.clear();
  EXPECT_EQ(candidates(threads, &why), "");
  EXPECT_NE(why.find("are threads of one process on one GPU"), std::string::npos) << why;
  // NCCL missing on one rank.
  JobFacts no_nccl = job_of(2, {"h b"}, {"GPU-0", "GPU-1"});
  no_nccl.ranks[1].nccl_missing = "libnccl.so.2: not found";
  why.clear();
  EXPECT_EQ(candidates(no_nccl, &why), "");
  EXPECT_NE(why.find("nccl: rank 1: libnccl.so.2: not found"), std::string::npos) << why;
  EXPECT_EQ(nccl_can_serve(no_nccl).status, gcommNotSupported);
}

TEST(Transports, RanksWithDevicesOfTwoKindsAreRefusedNamingThem) {
  JobFacts mixed = job_of(3, {"h b"}, {"GPU-0", "GPU-1", "GPU-2"});
  mixed.ranks[2].device_kind = gcommDeviceHost;
  try {
    candidates(mixed);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("rank 2 uses the host and rank 0 a CUDA device"), std::string::npos)
        << e.message();
  }
}

TEST(Transports, EveryKindHasOneEntryWithAName) {
  for (gcommTransport_t kind : {gcommTransportNccl, gcommTransportLocal, gcommTransportSocket,
                                gcommTransportShm, gcommTransportCudaIpc}) {
    const TransportEntry* t = find_transport(kind);
    ASSERT_NE(t, nullptr) << kind;
    EXPECT_EQ(t->kind, kind);
    EXPECT_NE(std::string(t->name), "");
    EXPECT_TRUE((t->can_serve != nullptr && t->make != nullptr) || t->not_from_store != nullptr) << t->name;
  }
  EXPECT_EQ(find_transport(gcommTransportAuto), nullptr);
}

// Names come from the table: the C API's, and the variable's refusal lists them all.
TEST(Transports, NamesComeFromTheTable) {
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportSocket)), "socket");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportMpi)), "mpi");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportShm)), "shm");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportCudaIpc)), "cuda-ipc");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportAuto)), "auto");
  EXPECT_EQ(std::string(gcommGetTransportName(static_cast<gcommTransport_t>(77))), "unknown");
  EXPECT_NE(std::string(gcommGetLastError()).find("77 is not a gcommTransport_t"), std::string::npos);
  setenv("GRADCOMM_TRANSPORT", "tcp", 1);
  std::string message;
  try {
    transport_or_env(gcommTransportAuto);
  } catch (const Error& e) {
    message = e.message();
  }
  unsetenv("GRADCOMM_TRANSPORT");
  EXPECT_NE(message.find("'tcp' is not one of auto, nccl, cuda-ipc, shm, socket, local, mpi"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace gradcomm::comm
