// The socket transport: host ranks in separate processes (one per rank, under
// torchrun, mpirun, srun or by hand), over a TCP connection between every pair
// of ranks (comm/socket/peer_links.*), running the collectives of
// comm/exchange/exchange_transport.hpp. gcommCommInit / gcommCommInitFromEnv pick
// it for a host device when the ranks are on several hosts (comm/host_transport.hpp).
#pragma once

#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// This rank of a socket-transport job, meeting the others through the store
// (like make_nccl_transport_from_store). Collective: every rank must call it.
std::unique_ptr<Transport> make_socket_transport_from_store(const bootstrap::LaunchConfig& launch);
// The same over a job that already met (comm/host_transport.cpp's choice).
std::unique_ptr<Transport> make_socket_transport(bootstrap::Bootstrap& met,
                                                 const bootstrap::LaunchConfig& launch);

}  // namespace gradcomm::comm
