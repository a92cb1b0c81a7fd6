// Store-met init of the CUDA transports' processes: the cuda-ipc transport asked
// for by name, and gcommTransportAuto's choice between it and NCCL.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <string>
#include <vector>

#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "comm/cuda_ipc/gpu_sharing.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/nccl/store_init.hpp"
#include "comm/nccl/store_meet.hpp"
#include "comm/shm/shm_transport.hpp"
#include "comm/store_backed_transport.hpp"
#include "common/cuda_check.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::unique_ptr<Transport> make_cuda_ipc_transport(Bootstrap& met, const LaunchConfig& launch,
                                                   gcommDevice_t device);

namespace {

// Every rank's GPU place and, where NCCL would not load there, why.
struct RankGpu {
  GpuPlace place;
  long pid = 0;
  std::string nccl_missing;
};

std::vector<RankGpu> gather_gpus(Bootstrap& met, gcommDevice_t device) {
  // The UUID names a GPU (or a MIG instance, which CUDA IPC cannot span) whatever
  // CUDA_VISIBLE_DEVICES each process sees.
  cudaDeviceProp prop{};
  GCOMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.ordinal));
  char uuid[2 * sizeof(prop.uuid.bytes) + 8] = "GPU-";
  for (size_t i = 0; i < sizeof(prop.uuid.bytes); ++i)
    std::snprintf(uuid + 4 + 2 * i, 3, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
  std::string why;
  const std::string nccl_missing = nccl_if_loaded(&why) != nullptr ? std::string() : why;
  const std::string mine =
      host_identity() + "\n" + uuid + "\n" + std::to_string(::getpid()) + "\n" + nccl_missing;
  const std::vector<std::vector<uint8_t>> all =
      met.store().gather("cuda/gpu", std::vector<uint8_t>(mine.begin(), mine.end()), met.deadline());
  std::vector<RankGpu> gpus(all.size());
  for (size_t q = 0; q < all.size(); ++q) {
    const std::string s(all[q].begin(), all[q].end());
    const size_t a = s.find('\n'), b = s.find('\n', a + 1), c = s.find('\n', b + 1);
    require(a != std::string::npos && b != std::string::npos && c != std::string::npos, "rank ", q,
            " sent a GPU place this rank cannot read (another gradcomm version?)");
    gpus[q] = RankGpu{GpuPlace{s.substr(0, a), s.substr(a + 1, b - a - 1)},
                      std::atol(s.substr(b + 1, c - b - 1).c_str()), s.substr(c + 1)};
  }
  return gpus;
}

// CUDA IPC opens memory of other processes only: ranks that are threads of one
// process on one GPU are the local transport's.
void refuse_threads_of_one_process(const std::vector<RankGpu>& gpus) {
  for (size_t q = 1; q < gpus.size(); ++q)
    for (size_t p = 0; p < q; ++p)
      if (gpus[p].pid == gpus[q].pid && gpus[p].place.host == gpus[q].place.host)
        fail(gcommInvalidArgument, "ranks ", p, " and ", q,
             " are threads of one process on one GPU: the cuda-ipc transport joins processes; ranks that are "
             "threads of one process share a GPU through the local transport (gcommCommInitLocal)");
}

std::vector<GpuPlace> places_of(const std::vector<RankGpu>& gpus) {
  std::vector<GpuPlace> places;
  for (const RankGpu& g : gpus) places.push_back(g.place);
  return places;
}

}  // namespace

std::unique_ptr<Transport> make_cuda_ipc_transport_from_store(const LaunchConfig& launch) {
  refuse_cuda_ipc_without_a_gpu();
  NcclRankMet ready = meet_as_nccl_rank(launch, [] { return std::string(); });
  const gcommDevice_t device = ready.device;
  return finish_store_init(std::move(ready.boot), launch, "cuda-ipc", [&](Bootstrap& met) {
    const std::vector<RankGpu> gpus = gather_gpus(met, device);
    std::string detail;
    const GpuSharing sharing = gpu_sharing(places_of(gpus), detail);
    if (sharing != GpuSharing::kOneGpu)
      fail(gcommInvalidArgument, "the cuda-ipc transport needs every rank on one GPU of one host, ",
           sharing == GpuSharing::kMixed ? detail
           : gpus.size() == 1            ? std::string("and there is one rank")
                              : cat("and these ", gpus.size(), " ranks each have a GPU of their own"),
           " (GRADCOMM_TRANSPORT=nccl, or unset, for a GPU per rank)");
    refuse_threads_of_one_process(gpus);
    return make_cuda_ipc_transport(met, launch, device);
  });
}

std::unique_ptr<Transport> make_cuda_transport_from_store(const LaunchConfig& launch) {
  // NCCL's presence is asked after the ranks met: the cuda-ipc transport needs none.
  NcclRankMet ready = meet_as_nccl_rank(launch, [] { return std::string(); });
  const gcommDevice_t device = ready.device;
  return finish_store_init(
      std::move(ready.boot), launch, "auto", [&](Bootstrap& met) -> std::unique_ptr<Transport> {
        const std::vector<RankGpu> gpus = gather_gpus(met, device);
        std::string detail;
        switch (gpu_sharing(places_of(gpus), detail)) {
          case GpuSharing::kOneGpu:
            refuse_threads_of_one_process(gpus);
            GCOMM_INFO(INIT, "rank ", launch.rank, ": CUDA transport cuda-ipc: all ", gpus.size(),
                       " ranks on one GPU (", gpus[0].place.gpu, "), which NCCL refuses");
            return make_cuda_ipc_transport(met, launch, device);
          case GpuSharing::kMixed:
            fail(gcommInvalidArgument, detail,
                 ": NCCL needs a GPU per rank and the cuda-ipc transport every rank on one GPU; give each "
                 "rank "
                 "its own GPU, or put all on one (CUDA_VISIBLE_DEVICES, LOCAL_RANK)");
          case GpuSharing::kOwnGpus:
            break;
        }
        for (size_t q = 0; q < gpus.size(); ++q)
          if (!gpus[q].nccl_missing.empty()) fail(gcommNotSupported, "rank ", q, ": ", gpus[q].nccl_missing);
        GCOMM_INFO(
            INIT, "rank ", launch.rank, ": CUDA transport nccl: ",
            gpus.size() == 1 ? std::string("one rank") : cat("a GPU per rank (", gpus.size(), " ranks)"));
        return make_nccl_transport_over(met, launch, device);
      });
}

}  // namespace gradcomm::comm
