#include "comm/nccl/store_init.hpp"

#include <nccl.h>

#include <cstring>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/nccl/nccl_transport.hpp"
#include "common/device.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::unique_ptr<Transport> make_nccl_over_job(Bootstrap& met, const LaunchConfig& launch, const JobFacts&,
                                              std::string&) {
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
  return make_nccl_transport_from_id(id, launch.rank, launch.world_size, launch.device, left);
}

}  // namespace gradcomm::comm
