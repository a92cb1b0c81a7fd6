#include "comm/exchange/message_flows.hpp"

#include "comm/bootstrap/store_state.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

bool MessageFlow::start_next_out() {
  if (next_out >= n_out) return false;
  if (gate != nullptr && outs[next_out].after > *gate) return false;
  const OutMessage& m = outs[next_out++];
  encode_phase_header(m.tag, m.bytes, out_header);
  out = m.data;
  out_done = 0;
  out_total = kPhaseHeaderBytes + m.bytes;
  return true;
}

bool MessageFlow::start_next_in() {
  if (next_in >= n_in) return false;
  if (gate != nullptr && ins[next_in].after > *gate) return false;
  in_done = 0;
  in_total = kPhaseHeaderBytes + ins[next_in++].bytes;
  return true;
}

void MessageFlows::charge_wait(std::chrono::nanoseconds idle) noexcept {
  if (idle.count() <= 0) return;
  for (size_t q = 0; q < flows_.size(); ++q)
    if (flows_[q].receiving() || flows_[q].sending())
      waited_ns_[q].fetch_add(static_cast<uint64_t>(idle.count()), std::memory_order_relaxed);
}

void MessageFlows::start_phase(const std::vector<PeerTransfer>& transfers, const PhaseTag& tag, int me) {
  for (size_t q = 0; q < flows_.size(); ++q) {
    flows_[q] = MessageFlow{};
    if (static_cast<int>(q) == me) continue;
    const PeerTransfer& t = transfers[q];
    MessageFlow& f = flows_[q];
    phase_out_[q] = OutMessage{t.out, t.out_bytes, tag};
    phase_in_[q] = InMessage{t.in, t.in_bytes, tag};
    if (t.sends) {
      f.outs = &phase_out_[q];
      f.n_out = 1;
      f.start_next_out();
    }
    if (t.receives) {
      f.ins = &phase_in_[q];
      f.n_in = 1;
      f.start_next_in();
    }
  }
}

void MessageFlows::start_messages(const std::vector<PeerQueue>& queues, int me, const size_t* gate) {
  for (size_t q = 0; q < flows_.size(); ++q) {
    flows_[q] = MessageFlow{};
    if (static_cast<int>(q) == me) continue;
    MessageFlow& f = flows_[q];
    f.gate = gate;
    f.outs = queues[q].out.data();
    f.n_out = queues[q].out.size();
    f.ins = queues[q].in.data();
    f.n_in = queues[q].in.size();
    f.start_next_out();
    f.start_next_in();
  }
}

bool MessageFlows::resume() {
  bool started = false;
  for (MessageFlow& f : flows_) {
    if (f.gate == nullptr) continue;
    if (!f.sending() && f.start_next_out()) started = true;
    if (!f.receiving() && f.start_next_in()) started = true;
  }
  return started;
}

void MessageFlows::forget_queues() {
  for (MessageFlow& f : flows_) {
    f.outs = nullptr;  // the message in flight keeps its header and payload pointer
    f.n_out = f.next_out = 0;
    f.ins = nullptr;
    f.n_in = f.next_in = 0;
    f.in_done = f.in_total = 0;
    f.gate = nullptr;
  }
}

bool MessageFlows::holding() const {
  for (const MessageFlow& f : flows_)
    if (f.holding()) return true;
  return false;
}

uint64_t MessageFlows::payload_sent() const {
  uint64_t payload = 0;
  for (const MessageFlow& f : flows_)
    for (size_t i = 0; i < f.n_out; ++i) payload += f.outs[i].bytes;
  return payload;
}

void MessageFlows::fail_timeout(const std::string& what, int me) const {
  std::vector<int> silent, stuck;
  for (size_t q = 0; q < flows_.size(); ++q) {
    if (flows_[q].receiving())
      silent.push_back(static_cast<int>(q));
    else if (flows_[q].sending())
      stuck.push_back(static_cast<int>(q));
  }
  std::string detail;
  if (!silent.empty()) detail = cat("waiting for data from ", bootstrap::rank_list(silent));
  if (!stuck.empty())
    detail += cat(detail.empty() ? "" : "; ", bootstrap::rank_list(stuck), " did not take this rank's data");
  fail(gcommTimeout, what, " did not complete within the timeout on rank ", me, ": ", detail,
       " (a rank that is stuck, slower by more than the timeout, or calling other collectives)");
}

void MessageFlows::fail_held(const std::string& what, int me) const {
  std::vector<int> held;
  for (size_t q = 0; q < flows_.size(); ++q)
    if (flows_[q].holding()) held.push_back(static_cast<int>(q));
  fail(gcommInternalError, what, " on rank ", me, ": the messages left for ", bootstrap::rank_list(held),
       " wait for work that what arrived does not allow (a schedule error in gradcomm)");
}

}  // namespace gradcomm::comm
