// gcommTransportAuto for host ranks that met through the store: the shm transport
// when every rank is on one host and maps the shared segment, the socket
// transport otherwise (several hosts, one rank, or ranks in separate PID
// namespaces or of separate users: containers). Every rank sees the same answers, so all choose alike; the
// INFO line says what was chosen and why. GRADCOMM_TRANSPORT (or
// config.transport) names one instead: the network lab forces "socket", whose
// ranks share a host but must talk over its shaped links.
#pragma once

#include <memory>

#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

std::unique_ptr<Transport> make_host_transport_from_store(const bootstrap::LaunchConfig& launch);

}  // namespace gradcomm::comm
