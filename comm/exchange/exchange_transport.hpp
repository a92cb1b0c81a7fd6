// The collectives of the host transports whose ranks are separate processes,
// written once over a PeerExchange (comm/exchange/peer_exchange.hpp): the
// socket transport's TCP connections and the MPI transport's point-to-point
// calls run the same algorithms, so they give the same bits.
//
// Every reduction combines the ranks in rank order in float and rounds once, the
// local transport's math (kernels/reduce/reduce_math.hpp): every rank gets the same
// bits, the same bits as the local transport, run after run. Algorithms (n
// ranks, each moving about (n-1)/n of the data per phase, like a ring, with no
// rank a hot spot):
//   all-reduce      reduce-scatter: rank q receives slice q from every rank and
//                   reduces it; then all-gather of the reduced slices
//   reduce-scatter  the first phase of all-reduce, into recvbuf
//   reduce          the first phase, then the slices gathered at the root
//   broadcast       the root scatters the slices; then the others all-gather
//   all-gather      every rank sends its block to every other
//   barrier         a header from every rank to every other
// Messages larger than 8 MiB go in 8 MiB pieces, which bounds the scratch memory.
// On wires that can hold a message back (runs_gated_messages: socket, shm) the
// all-reduce's pieces are pipelined, one run of messages per peer instead of two
// phases per piece, with the same bits; its pieces are the wire's
// pipelined_slice_bytes to each peer (socket 32 KiB, shm 8 MiB pieces).
// A collective runs to completion before the call returns (the stream is
// ignored), bounded by the timeout. Ranks that call different collectives get
// gcommInvalidArgument (the rank that noticed) or gcommRemoteError (the others),
// and the communicator cannot be used after it: its byte streams are out of step.
#pragma once

#include <memory>

#include "comm/exchange/peer_exchange.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// A transport of kind `kind` (gcommTransportSocket, gcommTransportMpi) over `links`.
std::unique_ptr<Transport> make_exchange_transport(std::unique_ptr<PeerExchange> links, gcommTransport_t kind,
                                                   double timeout_s);

}  // namespace gradcomm::comm
