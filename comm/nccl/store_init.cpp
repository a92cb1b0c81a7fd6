#include "comm/nccl/store_init.hpp"

#include <nccl.h>

#include <cstring>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/store_backed_transport.hpp"
#include "comm/nccl/nccl_transport.hpp"
#include "common/device.hpp"
#include "common/log.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_library.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::unique_ptr<Transport> make_nccl_transport_from_store(const LaunchConfig& launch) {
  if (is_host(launch.device))
    fail(gcommNotSupported,
         "config.transport is gcommTransportNccl but config.device is the host: NCCL needs a CUDA device "
         "per rank; host ranks use the socket transport (gcommTransportAuto or gcommTransportSocket)");
  RankReport mine;
  gcommDevice_t device = launch.device;
  if (!gpu_available()) {
    mine.status = gcommNotSupported;
    mine.message =
        cat("no usable GPU on this machine (", no_gpu_reason(),
            "): ranks in separate processes communicate through NCCL, which needs a CUDA device per rank; "
            "without a GPU, set config.device to gcommHostDevice() for host ranks over TCP (the socket "
            "transport)");
  } else {
    try {
      device = validate_device(launch.device, cat("rank ", launch.rank, "'s device").c_str());
    } catch (const Error& e) {
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

  return finish_store_init(std::move(boot), launch, "nccl", [&](Bootstrap& met) -> std::unique_ptr<Transport> {
    ncclUniqueId id;
    const std::string key = "nccl/unique_id";
    if (launch.rank == 0) {
      GCOMM_NCCL_CHECK(nccl().GetUniqueId(&id));
      std::vector<uint8_t> bytes(sizeof(id));
      std::memcpy(bytes.data(), &id, sizeof(id));
      met.store().set(key, bytes, met.deadline());
    } else {
      std::vector<uint8_t> bytes = met.store().get(key, met.deadline());
      if (bytes.size() != sizeof(id))
        fail(gcommRemoteError, "the store's '", key, "' has ", bytes.size(), " bytes, not the ", sizeof(id),
             " of an ncclUniqueId (a rank built against another NCCL?)");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    double left = std::max(seconds_left(met.deadline()), 0.001);
    return make_nccl_transport_from_id(id, launch.rank, launch.world_size, device, left);
  });
}

}  // namespace gradcomm::comm
