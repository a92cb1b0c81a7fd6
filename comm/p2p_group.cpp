#include "comm/p2p_group.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include "comm/group.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

namespace {

// This thread's kept calls, per transport in the order of its first call.
thread_local std::vector<std::pair<P2PBatchRunner*, std::vector<CollectiveArgs>>> t_batches;

void open_batches() {}

// At the group's end: every transport's batch, in order. After a failure the
// rest are not run (group_end fails and aborts every communicator of the group).
void run_batches() {
  auto batches = std::move(t_batches);
  t_batches.clear();
  for (auto& [transport, calls] : batches) {
    transport->run_p2p_batch(calls, true);  // anything thrown: group_end (comm/group.cpp) reports it
  }
}

const TransportGroupHooks kHostP2PGroup{open_batches, run_batches, true};

}  // namespace

bool defer_p2p_to_group_end(P2PBatchRunner* transport, const CollectiveArgs& call) {
  if (!in_group()) return false;
  join_transport_group(kHostP2PGroup);
  auto it =
      std::find_if(t_batches.begin(), t_batches.end(), [&](const auto& b) { return b.first == transport; });
  if (it == t_batches.end()) {
    t_batches.emplace_back(transport, std::vector<CollectiveArgs>{});
    it = t_batches.end() - 1;
  }
  it->second.push_back(call);
  return true;
}

}  // namespace gradcomm::comm
