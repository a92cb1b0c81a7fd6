// The transport table (in the spirit of NCCL's ncclTransports[]): every transport
// a communicator can be built on, one entry each, defined in transports.cpp. A new
// store-met transport is a folder under comm/ plus one line there (and its
// gcommTransport_t value); nothing in bootstrap/ or group.cpp names one, and
// comm/api/comm_init_api.cpp names only the MPI transport, which is made from an
// MPI communicator instead of through the store. The local transport keeps its own
// creation call (gcommCommInitLocal) and the NCCL-only calls live in
// comm/nccl/nccl_api.cpp. Group launch is a
// Transport hook (Transport::join_group).
#pragma once

#include <memory>

#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// One rank of a multi-process job that met through the rendezvous store.
using StoreFactory = std::unique_ptr<Transport> (*)(const bootstrap::LaunchConfig& launch);

struct TransportEntry {
  gcommTransport_t kind;
  const char* name;            // "nccl": in logs and in the ranks' agreement at init
  const char* enumerator;      // "gcommTransportNccl": in messages
  gcommDeviceKind_t serves;    // the device kind gcommTransportAuto picks it for
  StoreFactory from_store;     // NULL: not a multi-process transport (local ranks are threads)
  const char* not_from_store;  // with from_store NULL: what to call instead
};

// The table's entry for `kind`, or NULL.
const TransportEntry* find_transport(gcommTransport_t kind) noexcept;

// The transport a rank of a store-met job builds: config.transport, or for
// gcommTransportAuto the entry that serves the rank's device. Throws
// gcommInvalidArgument with what to do for a kind that cannot be made that way,
// or one that cannot move that device's memory.
const TransportEntry& transport_for_job(gcommTransport_t requested, const gcommDevice_t& device);

// `configured`, or with gcommTransportAuto the GRADCOMM_TRANSPORT variable's
// choice (a table name: "socket", "mpi", ...); a bad name is gcommInvalidArgument.
gcommTransport_t transport_or_env(gcommTransport_t configured);

}  // namespace gradcomm::comm
