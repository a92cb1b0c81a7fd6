// The local transport: N ranks as threads of one process, on the host or all on
// one GPU, with NCCL's collective semantics. NCCL refuses two ranks on one GPU;
// this makes multi-rank runs (and the test suite's multi-rank cases) possible on
// one GPU or none.
//
// Collectives are the peer-memory collective (comm/peer_memory/), this transport
// its backend over the group's rendezvous. Host: each collective runs to
// completion in the calling threads; the work of a reduction is split between
// the ranks (rank r reduces slice r into a shared float scratch, then every rank
// converts the result out). GPU: the same two phases are CUDA kernels on each
// rank's stream, ordered across ranks with events; nothing is staged through
// host memory and the call returns once its work is enqueued.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "comm/transport.hpp"

namespace gradcomm::comm {

std::vector<std::unique_ptr<Transport>> make_local_transports(int nranks, gcommDevice_t device,
                                                              double timeout_s);

}  // namespace gradcomm::comm
