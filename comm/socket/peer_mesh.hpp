// The connections of a socket-transport job: one TCP connection between every
// pair of ranks, made once at init through the rendezvous store.
//   1. every rank listens on a port the kernel picks and publishes "host port"
//      through a store gather (rank 0: MASTER_ADDR, which its peers already
//      reach; the others: their end of the route to the store);
//   2. rank r connects to every lower rank and says hello (job key, world size,
//      its rank, the rank it wants), and waits for the acceptor's acknowledgement;
//   3. then it accepts one connection from every higher rank. A connection whose
//      hello is malformed, late or for another job is logged and dropped.
// Connecting only downward means no rank waits on one that waits on it.
#pragma once

#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/net/tcp_socket.hpp"

namespace gradcomm::comm::sock {

// One connected, non-blocking socket per other rank (indexed by rank; this
// rank's entry is invalid). Bounded by the bootstrap's init deadline: throws
// gcommTimeout naming the ranks that never connected, gcommRemoteError when a
// peer refused or closed the connection.
std::vector<net::Socket> connect_peer_mesh(bootstrap::Bootstrap& boot, const std::string& master_addr,
                                           const std::string& job_key);

}  // namespace gradcomm::comm::sock
