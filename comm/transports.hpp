// The transport table (in the spirit of NCCL's ncclTransports[]): every transport
// a communicator can be built on, one entry each, defined in transports.cpp. Each
// store-met entry answers, from the job's facts (comm/job_facts.hpp: where every
// rank runs), whether it can serve the job, and builds this rank's transport over
// the met job; gcommTransportAuto takes the first entry, in table order, that can
// (as NCCL asks each transport's canConnect). A new store-met transport is a folder
// under comm/ plus one line there (and its gcommTransport_t value); nothing else
// chooses. The local transport keeps its own creation call (gcommCommInitLocal),
// the MPI transport is made from an MPI communicator (comm/api/comm_init_api.cpp),
// and the NCCL-only calls live in comm/nccl/nccl_api.cpp.
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/job_facts.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// Whether a transport can serve a job with these facts (comm/job_facts.hpp: Fit). Pure.
using CanServe = Fit (*)(const JobFacts& job);
// This rank's transport over a job whose ranks met (`launch.device` validated).
// Collective, and every rank gets the same answer: nullptr, with `why_not`, when
// it could not after all (shm: a segment some rank could not map), and
// gcommTransportAuto then asks the next entry.
using MakeOverJob = std::unique_ptr<Transport> (*)(bootstrap::Bootstrap& met,
                                                   const bootstrap::LaunchConfig& launch, const JobFacts& job,
                                                   std::string& why_not);

struct TransportEntry {
  gcommTransport_t kind;
  const char* name;         // "nccl": in logs and in the ranks' agreement at init
  const char* enumerator;   // "gcommTransportNccl": in messages
  gcommDeviceKind_t moves;  // the memory it moves: host, or a CUDA device
  CanServe can_serve;       // NULL: not a store-met transport (see not_from_store)
  MakeOverJob make;
  // Optional: for a transport asked for by name, refuses at once, before the
  // rendezvous, what this rank can never serve (cuda-ipc on a machine without a GPU).
  void (*refuse_before_meeting)(const bootstrap::LaunchConfig& launch);
  const char* not_from_store;  // with can_serve NULL: what to call instead
};

// The table's entry for `kind`, or NULL.
const TransportEntry* find_transport(gcommTransport_t kind) noexcept;

// config.transport checked against the device before anything is done: the entry
// asked for, or NULL for gcommTransportAuto. Throws gcommInvalidArgument with what
// to do for a kind that cannot be made through the store, or one that cannot move
// that device's memory (NCCL on the host: gcommNotSupported).
const TransportEntry* requested_transport(gcommTransport_t requested, const gcommDevice_t& device);

// gcommTransportAuto's candidates for a job with these facts: every entry that
// moves the job's memory and can serve it, in table order (`why_not` gets every
// other entry's reason). Pure. Throws gcommInvalidArgument when the ranks' devices
// are of different kinds.
std::vector<const TransportEntry*> transports_for_job(const JobFacts& job, std::string* why_not = nullptr);

// This rank of a store-met job: meets the others, learns the job's facts, and
// builds the transport asked for (refused with its reason when it cannot serve the
// job), or for gcommTransportAuto the first that can. Collective.
std::unique_ptr<Transport> make_transport_from_store(const bootstrap::LaunchConfig& launch);

// `configured`, or with gcommTransportAuto the GRADCOMM_TRANSPORT variable's
// choice (a table name: "socket", "mpi", ...); a bad name is gcommInvalidArgument.
gcommTransport_t transport_or_env(gcommTransport_t configured);

}  // namespace gradcomm::comm
