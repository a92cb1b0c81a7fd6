#include "comm/nccl/store_meet.hpp"

#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

NcclRankMet meet_as_nccl_rank(const LaunchConfig& launch, const std::function<std::string()>& can_take_part) {
  if (is_host(launch.device))
    fail(gcommNotSupported,
         "config.transport is gcommTransportNccl but config.device is the host: NCCL needs a CUDA device "
         "per rank; host ranks use gcommTransportAuto (shm on one host, socket across hosts)");
  RankReport mine;
  gcommDevice_t device = launch.device;
  if (!gpu_available()) {
    mine.status = gcommNotSupported;
    mine.message =
        cat("no usable GPU on this machine (", no_gpu_reason(),
            "): ranks in separate processes communicate through NCCL, which needs a CUDA device per rank; "
            "without a GPU, set config.device to gcommHostDevice() for host ranks (the shm transport on one "
            "host, socket across hosts)");
  } else {
    try {
      device = validate_device(launch.device, cat("rank ", launch.rank, "'s device").c_str());
      const std::string why_not = can_take_part();
      if (!why_not.empty()) {
        mine.status = gcommNotSupported;
        mine.message = why_not;
      }
    } catch (...) {  // whatever was thrown, every rank hears it at the meeting
      const Error e = as_error(std::current_exception());
      mine.status = e.status();
      mine.message = e.message();
    }
  }

  auto boot = std::make_unique<Bootstrap>(rendezvous_options(launch));
  std::vector<RankReport> reports = boot->meet(mine);
  // Every rank has every report: all fail alike, with no need to tell each other.
  if (mine.status != gcommSuccess)
    fail(mine.status, mine.message, ". The rendezvous itself worked: ",
         launch.world_size == 1 ? std::string("the single rank") : cat("all ", launch.world_size, " ranks"),
         " met at ", boot->address());
  throw_if_any_failed(reports, launch.rank);
  return NcclRankMet{std::move(boot), device};
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
