// The cuda-ipc transport's answers to the transport table (comm/transports.hpp),
// compiled with CUDA or without: whether it can serve a job, and its refusal before
// the rendezvous on a machine without a GPU.
#include "comm/bootstrap/store_state.hpp"
#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "common/device.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

Fit cuda_ipc_can_serve(const JobFacts& job) {
  std::string shared;
  if (job.size() < 2) return Fit{"one rank: nothing to share"};
  if (gpu_sharing(job, shared) != GpuSharing::kOneGpu)
    return Fit{shared.empty() ? cat("it joins processes on one GPU, and these ", job.size(),
                                    " ranks each have a GPU of their own")
                              : cat("it needs every rank on one GPU, and ", shared)};
  // CUDA IPC opens memory of other processes only: threads of one process share a
  // GPU through the local transport.
  for (int q = 1; q < job.size(); ++q)
    for (int p = 0; p < q; ++p)
      if (job.ranks[p].pid == job.ranks[q].pid && job.ranks[p].host == job.ranks[q].host)
        return Fit{
            cat("ranks ", p, " and ", q,
                " are threads of one process on one GPU: it joins processes; ranks that are threads of "
                "one process share a GPU through the local transport (gcommCommInitLocal)")};
  // Its control plane is the shm transport, which opens rank 0's segment through /proc.
  const std::vector<int> apart = job.apart_from_rank0(/*pid_namespace=*/true);
  if (!apart.empty())
    return Fit{
        cat(bootstrap::rank_list(apart),
            " in another PID namespace (a container) than rank 0: its processes meet in shared memory, "
            "opened through rank 0's /proc entry")};
  return Fit{};
}

void refuse_cuda_ipc_without_a_gpu(const bootstrap::LaunchConfig&) {
  if (gpu_available()) return;
  fail(gcommNotSupported,
       "the cuda-ipc transport joins processes that share one GPU, and this machine has no usable GPU (",
       no_gpu_reason(),
       "): host ranks on one host take config.device = gcommHostDevice() (the shm transport, "
       "GRADCOMM_TRANSPORT=shm or unset)");
}

}  // namespace gradcomm::comm
