// The socket transport: host ranks in separate processes (one per rank, under
// torchrun, mpirun, srun or by hand), over a TCP connection between every pair
// of ranks (comm/socket/peer_links.*), running the collectives of
// comm/exchange/exchange_transport.hpp. gcommCommInit / gcommCommInitFromEnv pick
// it for a host device.
#pragma once

#include <memory>

#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// This rank of a socket-transport job, meeting the others through the store
// (like make_nccl_transport_from_store). Collective: every rank must call it.
std::unique_ptr<Transport> make_socket_transport_from_store(const bootstrap::LaunchConfig& launch);

}  // namespace gradcomm::comm
