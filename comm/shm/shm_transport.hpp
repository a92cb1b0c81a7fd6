// The shm transport: host ranks in separate processes on one host (one per rank,
// under torchrun, mpirun, srun or by hand), over the byte rings of one shared
// segment (comm/shm/shm_links.*), running the collectives of
// comm/exchange/exchange_transport.hpp: the socket transport's algorithms, so the
// same bits, without TCP. GRADCOMM_TRANSPORT=shm or config.transport =
// gcommTransportShm asks for it (ranks on different hosts are refused at init);
// gcommTransportAuto picks it for host ranks that are all on one host
// (comm/host_transport.hpp).
#pragma once

#include <memory>

#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// This rank of an shm-transport job, meeting the others through the store.
// Collective: every rank must call it. Ranks on several hosts or in several PID
// namespaces (containers), or of several users, fail init with the reason.
std::unique_ptr<Transport> make_shm_transport_from_store(const bootstrap::LaunchConfig& launch);

// Over a job that met: the shm transport when every rank maps the segment, else
// nullptr with `why_not` (every rank gets the same answer). Collective.
std::unique_ptr<Transport> try_make_shm_transport(bootstrap::Bootstrap& met,
                                                  const bootstrap::LaunchConfig& launch,
                                                  std::string& why_not);

// Tells processes apart as being on one host: the hostname and the kernel's boot
// id (containers may share a hostname but not a kernel). The shm transport also
// needs one PID namespace (its segment is opened through rank 0's /proc entry).
std::string host_identity();

}  // namespace gradcomm::comm
