#include "comm/cuda_ipc/gpu_sharing.hpp"

#include "common/device.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

GpuSharing gpu_sharing(const std::vector<GpuPlace>& places, std::string& detail) {
  const auto same = [](const GpuPlace& a, const GpuPlace& b) { return a.host == b.host && a.gpu == b.gpu; };
  bool all_on_first = places.size() > 1;
  for (size_t q = 1; q < places.size(); ++q) all_on_first = all_on_first && same(places[q], places[0]);
  if (all_on_first) return GpuSharing::kOneGpu;
  for (size_t q = 0; q < places.size(); ++q)
    for (size_t p = 0; p < q; ++p)
      if (same(places[p], places[q])) {
        detail = cat("ranks ", p, " and ", q, " are on one GPU (", places[q].gpu, ") but not every rank is");
        return GpuSharing::kMixed;
      }
  return GpuSharing::kOwnGpus;
}

void refuse_cuda_ipc_without_a_gpu() {
  if (gpu_available()) return;
  fail(gcommNotSupported,
       "the cuda-ipc transport joins processes that share one GPU, and this machine has no usable "
       "GPU (",
       no_gpu_reason(),
       "): host ranks on one host take config.device = gcommHostDevice() (the shm "
       "transport, GRADCOMM_TRANSPORT=shm or unset)");
}

}  // namespace gradcomm::comm
