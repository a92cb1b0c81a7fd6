#include "comm/host_transport.hpp"

#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/shm/shm_transport.hpp"
#include "comm/socket/socket_transport.hpp"
#include "comm/store_backed_transport.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::unique_ptr<Transport> make_host_transport_from_store(const LaunchConfig& launch) {
  auto boot = std::make_unique<Bootstrap>(rendezvous_options(launch));
  throw_if_any_failed(boot->meet(RankReport{}), launch.rank);
  return finish_store_init(
      std::move(boot), launch, "auto", [&](Bootstrap& met) -> std::unique_ptr<Transport> {
        std::string why_not = "one rank: nothing to share";
        if (met.size() > 1) {
          if (std::unique_ptr<Transport> shm = try_make_shm_transport(met, launch, why_not)) {
            GCOMM_INFO(INIT, "rank ", launch.rank, ": host transport shm: all ", met.size(),
                       " ranks on one host (GRADCOMM_TRANSPORT=socket to use TCP)");
            return shm;
          }
        }
        GCOMM_INFO(INIT, "rank ", launch.rank, ": host transport socket: ", why_not);
        return make_socket_transport(met, launch);
      });
}

}  // namespace gradcomm::comm
