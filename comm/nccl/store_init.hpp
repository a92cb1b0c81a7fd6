// An NCCL rank of a multi-process job that met through gradcomm's rendezvous store
// (comm/rank_meeting.hpp checked its device and met the ranks; the transport table
// found that NCCL can serve the job: comm/nccl/nccl_job.hpp):
//   1. rank 0 creates the ncclUniqueId and publishes it; the others get it;
//   2. non-blocking NCCL init, bounded by what is left of the timeout.
// A failure is reported through the store, so the other ranks fail at once instead
// of at their timeout. The communicator keeps the store for the shutdown barrier
// (comm/store_backed_transport.hpp).
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/job_facts.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// The transport table's maker (comm/transports.hpp). Collective.
std::unique_ptr<Transport> make_nccl_over_job(bootstrap::Bootstrap& met,
                                              const bootstrap::LaunchConfig& launch, const JobFacts& job,
                                              std::string& why_not);

}  // namespace gradcomm::comm
