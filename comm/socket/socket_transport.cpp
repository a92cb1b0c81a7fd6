#include "comm/socket/socket_transport.hpp"

#include <vector>

#include "comm/exchange/exchange_transport.hpp"
#include "comm/socket/peer_mesh.hpp"
#include "comm/socket/socket_links.hpp"

namespace gradcomm::comm {

using namespace bootstrap;
using namespace net;

Fit socket_can_serve(const JobFacts&) {
  return Fit{};  // host ranks anywhere: TCP reaches them
}

std::unique_ptr<Transport> make_socket_over_job(Bootstrap& met, const LaunchConfig& launch, const JobFacts&,
                                                std::string&) {
  std::vector<Socket> peers = sock::connect_peer_mesh(met, launch.master_addr, launch.job_key);
  return make_exchange_transport(std::make_unique<sock::SocketLinks>(std::move(peers), launch.rank),
                                 gcommTransportSocket, launch.timeout_s);
}

}  // namespace gradcomm::comm
