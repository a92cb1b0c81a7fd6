// The socket transport: host ranks in separate processes (one per rank, under
// torchrun, mpirun, srun or by hand), over a TCP connection between every pair
// of ranks (comm/socket/socket_links.*), running the collectives of
// comm/exchange/exchange_transport.hpp. It serves any job of host ranks; the
// transport table (comm/transports.cpp) lists it after shm, so gcommTransportAuto
// takes it when the ranks are on several hosts.
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/job_facts.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// The table's questions (comm/transports.hpp): it serves every job of host ranks.
Fit socket_can_serve(const JobFacts& job);
// This rank's socket transport over a job that met. Collective.
std::unique_ptr<Transport> make_socket_over_job(bootstrap::Bootstrap& met,
                                                const bootstrap::LaunchConfig& launch, const JobFacts& job,
                                                std::string& why_not);

}  // namespace gradcomm::comm
