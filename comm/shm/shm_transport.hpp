// The shm transport: host ranks in separate processes on one host (one per rank,
// under torchrun, mpirun, srun or by hand), over the byte rings of one shared
// segment (comm/shm/shm_links.*), running the collectives of
// comm/exchange/exchange_transport.hpp: the socket transport's algorithms, so the
// same bits, without TCP. It serves a job of more than one host rank, all on one
// host and in one PID namespace; GRADCOMM_TRANSPORT=shm or config.transport =
// gcommTransportShm asks for it (other jobs are refused at init with the reason),
// and gcommTransportAuto takes it for such jobs (comm/transports.cpp).
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/job_facts.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// The table's questions (comm/transports.hpp). Whether the job's ranks can share a
// segment: all on rank 0's host and in its PID namespace (peers open the segment
// through rank 0's /proc entry); a rank alone gets a segment of a few KiB.
Fit shm_can_serve(const JobFacts& job);
// This rank's shm transport over a job that met: nullptr with `why_not` when some
// rank could not map the segment (every rank gets the same answer). Collective.
std::unique_ptr<Transport> make_shm_over_job(bootstrap::Bootstrap& met, const bootstrap::LaunchConfig& launch,
                                             const JobFacts& job, std::string& why_not);
// The same without the facts (the cuda-ipc transport's control plane).
std::unique_ptr<Transport> try_make_shm_transport(bootstrap::Bootstrap& met,
                                                  const bootstrap::LaunchConfig& launch,
                                                  std::string& why_not);

}  // namespace gradcomm::comm
