// Point-to-point calls made inside a group on the host transports. NCCL runs the
// sends and receives of one group concurrently, so a ring where every rank sends
// to its right and receives from its left completes; the host transports run
// each call to completion, so they keep the group's sends and receives and run
// them together, as one batch per transport, at the outermost gcommGroupEnd
// (the group's own hook, comm/group.hpp). Outside a group a send waits for its
// receive, as NCCL's would: two ranks that both send first wait for each other
// until the timeout.
#pragma once

#include <vector>

#include "comm/transport.hpp"

namespace gradcomm::comm {

// A transport that runs a batch of sends and receives together.
class P2PBatchRunner {
 public:
  virtual ~P2PBatchRunner() = default;
  // The calls in call order (`grouped`: a group's, at its end; else one call);
  // returns when all completed; throws the first failure.
  virtual void run_p2p_batch(const std::vector<CollectiveArgs>& calls, bool grouped) = 0;
};

// A count or dtype mismatch between a send and its receive (gcommInvalidArgument
// from a batch) leaves the communicators usable, as outside a group: the group's
// end reports it without aborting them (TransportGroupHooks::mismatch_is_local).
//
// Inside a group on this thread: keeps `call` for the group's end and returns
// true. Outside: returns false (the caller runs it now, as a batch of one).
bool defer_p2p_to_group_end(P2PBatchRunner* transport, const CollectiveArgs& call);

}  // namespace gradcomm::comm
