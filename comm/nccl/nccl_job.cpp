#include "comm/nccl/nccl_job.hpp"

#include "common/device.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

Fit nccl_can_serve(const JobFacts& job) {
  if (job.device_kind() != gcommDeviceCuda)
    return Fit{
        "it moves GPU memory and config.device is the host (host ranks: the shm transport on one host, "
        "socket across hosts)",
        gcommNotSupported};
  std::string shared;
  if (gpu_sharing(job, shared) != GpuSharing::kOwnGpus)
    return Fit{cat(
        "it needs a GPU per rank, and ",
        shared.empty() ? cat("all ", job.size(), " ranks are on one GPU (", job.ranks[0].gpu, ")") : shared)};
  for (int q = 0; q < job.size(); ++q)
    if (!job.ranks[q].nccl_missing.empty())
      return Fit{cat("rank ", q, ": ", job.ranks[q].nccl_missing), gcommNotSupported};
  return Fit{};
}

std::vector<int> nccl_device_list(int ndev, const int* devices) {
  require(ndev >= 1, "ndev must be >= 1, not ", ndev);
  // Before `devices` is read or anything sized by ndev: an absurd count is refused.
  const int visible = cuda_device_count();
  require(ndev <= visible, "ndev is ", ndev, " but ", visible,
          " GPU(s) are visible (NCCL needs one rank per GPU; several ranks on one GPU: gcommCommInitLocal)");
  std::vector<int> list(ndev);
  for (int i = 0; i < ndev; ++i) {
    list[i] = devices != nullptr ? devices[i] : i;
    validate_device(gcommCudaDevice(list[i]), "devices");
    for (int j = 0; j < i; ++j)
      require(list[j] != list[i], "cuda:", list[i],
              " is listed twice: NCCL needs one rank per GPU (use the local "
              "transport, gcommCommInitLocal, for several ranks on one GPU)");
  }
  return list;
}

}  // namespace gradcomm::comm
