// Whether the ranks of a CUDA job share GPUs, from where each one runs: the
// question that picks between NCCL (a GPU per rank) and the cuda-ipc transport
// (every rank on one GPU) for gcommTransportAuto. Pure, so tested without a GPU.
#pragma once

#include <string>
#include <vector>

namespace gradcomm::comm {

// Where a rank's GPU is: its host (comm/shm/shm_transport.hpp's host_identity)
// and the GPU's UUID, which names the device (or MIG instance) whatever
// CUDA_VISIBLE_DEVICES each process sees.
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

}  // namespace gradcomm::comm
