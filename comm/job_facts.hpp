// What the ranks of a store-met job learn about each other once they met: where
// each one runs. gcommTransportAuto asks each entry of the transport table, in
// order, whether it can serve a job with these facts (comm/transports.hpp), as NCCL
// asks each transport's canConnect; every answer is a pure function of the facts,
// so the choice is tested with made-up facts, GPUs or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gradcomm/types.h"

namespace gradcomm::comm {

namespace bootstrap {
class Bootstrap;
}

struct RankFacts {
  gcommDeviceKind_t device_kind = gcommDeviceHost;
  std::string host;            // host name and the kernel's boot id (host_identity)
  uint64_t pid_namespace = 0;  // the inode of /proc/self/ns/pid (0: unknown)
  long pid = 0;
  std::string gpu;  // CUDA ranks: the GPU's UUID (a MIG instance's own), whatever CUDA_VISIBLE_DEVICES
  std::string nccl_missing;  // CUDA ranks: why NCCL would not load in this process ("" if it would)
};

struct JobFacts {
  std::vector<RankFacts> ranks;  // by rank
  int size() const { return static_cast<int>(ranks.size()); }
  gcommDeviceKind_t device_kind() const { return ranks.empty() ? gcommDeviceHost : ranks[0].device_kind; }
  // The ranks on another host than rank 0 (or, with `pid_namespace`, in another PID
  // namespace of it: a container of their own).
  std::vector<int> apart_from_rank0(bool pid_namespace) const;
};

// A transport's answer to "can you serve this job?" (comm/transports.hpp): an empty
// `why` if it can, else why not (naming the ranks at fault) and the status its
// refusal carries: gcommNotSupported when something is missing (NCCL on a rank),
// gcommInvalidArgument when the job is laid out wrong for it (ranks on several hosts
// for shm).
struct Fit {
  std::string why;
  gcommStatus_t status = gcommInvalidArgument;
  bool ok() const { return why.empty(); }
};

// Tells processes apart as being on one host: the host name and the kernel's boot
// id (containers may share a host name but not a kernel).
std::string host_identity();

// This process's facts for a rank on `device` (a CUDA device: its UUID through the
// CUDA runtime, and whether NCCL would load).
RankFacts this_rank_facts(const gcommDevice_t& device);

// Every rank's facts, through the store. Collective.
JobFacts gather_job_facts(bootstrap::Bootstrap& met, const gcommDevice_t& device);

// Where a rank's GPU is: its host and the GPU's UUID.
struct GpuPlace {
  std::string host;
  std::string gpu;
};

enum class GpuSharing {
  kOwnGpus,  // no two ranks on one GPU (a single rank too)
  kOneGpu,   // more than one rank, every one on the same GPU of one host
  kMixed,    // some ranks share a GPU, not all: `detail` names the first pair
};

GpuSharing gpu_sharing(const std::vector<GpuPlace>& places, std::string& detail);
GpuSharing gpu_sharing(const JobFacts& job, std::string& detail);

}  // namespace gradcomm::comm
