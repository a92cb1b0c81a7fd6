// The MPI transport: host ranks in separate processes over MPI (MPI's own wire:
// InfiniBand, shared memory, whatever the MPI in use drives), for host jobs on
// many machines where MPI is the network stack. It runs the collectives of
// comm/exchange/exchange_transport.hpp, the socket transport's, over MPI's
// non-blocking sends and receives (comm/mpi/mpi_links.hpp), not over MPI's own
// collectives: so it gives the same bits as the socket and local transports
// (every reduction in rank order in float, f16 and bf16 included, which MPI has
// no types for), every wait is bounded by the timeout and ends at an abort, and
// ranks that call different collectives are told so.
#pragma once

#include <memory>

#include "comm/transport.hpp"
#include "gradcomm/comm.h"

namespace gradcomm::comm {

// This process's rank over a duplicate of the MPI communicator (its Fortran
// handle, or GCOMM_MPI_COMM_WORLD). Collective over the communicator. Refuses a
// device that is not the host, and config rank / world size that differ from MPI's.
std::unique_ptr<Transport> make_mpi_transport(const gcommCommConfig_t& config, int mpi_comm_f,
                                              double timeout_s);

}  // namespace gradcomm::comm
