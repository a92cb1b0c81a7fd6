// An NCCL rank of a multi-process job that meets through gradcomm's rendezvous
// store (gcommCommInit, gcommCommInitFromEnv):
//   1. the rank checks its device (visible, a GPU present) without touching it;
//   2. rank 0 starts the store, every rank connects and meets at 'init', each
//      reporting whether it can take part: a rank that never arrives is named,
//      and a rank that cannot take part makes every rank fail with its reason;
//   3. rank 0 creates the ncclUniqueId and publishes it; the others get it;
//   4. non-blocking NCCL init, bounded by what is left of the timeout.
// Any failure after step 2 is reported through the store, so the other ranks fail
// at once instead of at their timeout. The communicator keeps the store for the
// shutdown barrier (comm/store_backed_transport.hpp).
#pragma once

#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

std::unique_ptr<Transport> make_nccl_transport_from_store(const bootstrap::LaunchConfig& launch);

// Steps 3 and 4 over ranks that met (the auto choice for CUDA devices,
// comm/cuda_ipc/cuda_ipc_transport.hpp, meets first, then picks NCCL).
std::unique_ptr<Transport> make_nccl_transport_over(bootstrap::Bootstrap& met,
                                                    const bootstrap::LaunchConfig& launch,
                                                    gcommDevice_t device);

}  // namespace gradcomm::comm
