#include "comm/nccl/store_init.hpp"

#include "comm/nccl/store_meet.hpp"

#include <nccl.h>

#include <cstring>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/nccl/nccl_transport.hpp"
#include "comm/store_backed_transport.hpp"
#include "common/device.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::unique_ptr<Transport> make_nccl_transport_over(Bootstrap& met, const LaunchConfig& launch,
                                                    gcommDevice_t device) {
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
}

std::unique_ptr<Transport> make_nccl_transport_from_store(const LaunchConfig& launch) {
  NcclRankMet ready = meet_as_nccl_rank(launch, [] {
    std::string why;
    return nccl_if_loaded(&why) != nullptr ? std::string() : why;  // names where it looked
  });
  const gcommDevice_t device = ready.device;
  return finish_store_init(std::move(ready.boot), launch, "nccl",
                           [&](Bootstrap& met) { return make_nccl_transport_over(met, launch, device); });
}

}  // namespace gradcomm::comm
