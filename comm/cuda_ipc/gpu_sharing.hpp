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

// The cuda-ipc transport asked for by name: every one of its ranks is on this
// machine's one GPU, so on a machine without a usable GPU no rank can serve it.
// Refused here, before the rendezvous, with gcommNotSupported naming the
// transport (the other ranks fail alike, each on its own: issue 44 #11).
void refuse_cuda_ipc_without_a_gpu();

}  // namespace gradcomm::comm
