#include "comm/exchange/peer_exchange.hpp"

#include "common/error.hpp"

namespace gradcomm::comm {

// Only reached by a caller that skipped runs_gated_messages(): a bug in gradcomm.
void PeerExchange::run_gated_messages(const std::vector<PeerQueue>&, const size_t&, Deadline,
                                      const std::string& what, const std::function<void()>&) {
  fail(gcommInternalError, what, ": this transport's wire cannot hold messages back (runs_gated_messages)");
}

size_t PeerExchange::messages_received(int) const {
  fail(gcommInternalError, "messages_received: this transport's wire cannot hold messages back");
}

}  // namespace gradcomm::comm
