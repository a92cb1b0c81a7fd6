#include "comm/socket/socket_transport.hpp"

#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/exchange/exchange_transport.hpp"
#include "comm/socket/peer_links.hpp"
#include "comm/socket/peer_mesh.hpp"
#include "comm/store_backed_transport.hpp"

namespace gradcomm::comm {

using namespace bootstrap;
using namespace net;

std::unique_ptr<Transport> make_socket_transport(Bootstrap& met, const LaunchConfig& launch) {
  std::vector<Socket> peers = sock::connect_peer_mesh(met, launch.master_addr, launch.job_key);
  return make_exchange_transport(std::make_unique<sock::PeerLinks>(std::move(peers), launch.rank),
                                 gcommTransportSocket, launch.timeout_s);
}

std::unique_ptr<Transport> make_socket_transport_from_store(const LaunchConfig& launch) {
  auto boot = std::make_unique<Bootstrap>(rendezvous_options(launch));
  throw_if_any_failed(boot->meet(RankReport{}), launch.rank);
  return finish_store_init(std::move(boot), launch, "socket",
                           [&](Bootstrap& met) { return make_socket_transport(met, launch); });
}

}  // namespace gradcomm::comm
