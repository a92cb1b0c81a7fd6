// The bookkeeping that every byte-stream wire of comm/exchange/ shares (the socket
// transport's TCP connections, the shm transport's rings): per peer, the message
// being sent and the one being received, each its 40-byte phase header followed by
// its payload, and the queue each comes from (run_phase's one message each way,
// or run_messages' queues). The wires move the bytes; this says which bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/exchange/peer_exchange.hpp"
#include "comm/exchange/phase_header.hpp"

namespace gradcomm::comm {

// Progress of one peer's messages: the current one each way.
struct MessageFlow {
  uint8_t out_header[kPhaseHeaderBytes];
  uint8_t in_header[kPhaseHeaderBytes];
  size_t out_done = 0, out_total = 0;  // header + payload
  const void* out = nullptr;           // the payload
  size_t in_done = 0, in_total = 0;
  const OutMessage* outs = nullptr;  // the queue, and the next message of it
  size_t n_out = 0, next_out = 0;
  const InMessage* ins = nullptr;
  size_t n_in = 0, next_in = 0;
  const size_t* gate = nullptr;  // run_gated_messages' gate (null: nothing is held back)

  bool sending() const { return out_done < out_total; }
  bool receiving() const { return in_done < in_total; }
  bool mid_send() const { return out_done > 0 && out_done < out_total; }
  // A message waits for the gate (nothing moves this way until it opens).
  bool holding() const { return (!sending() && next_out < n_out) || (!receiving() && next_in < n_in); }
  // Moves to the next message each way once the current one is done; false when
  // none is left or the next one waits for the gate.
  bool start_next_out();
  bool start_next_in();
  // Messages received completely so far.
  size_t in_completed() const { return receiving() ? next_in - 1 : next_in; }
  const InMessage& in() const { return ins[next_in - 1]; }
  // Payload bytes received of the current incoming message (the last one once all
  // arrived; 0 while the next one is held).
  size_t received_bytes() const {
    if (!receiving() && next_in < n_in) return 0;
    return in_done > kPhaseHeaderBytes ? in_done - kPhaseHeaderBytes : 0;
  }
};

// One flow per rank (this rank's stays empty), set up for a phase or a run of messages.
class MessageFlows {
 public:
  explicit MessageFlows(size_t ranks)
      : flows_(ranks), phase_out_(ranks), phase_in_(ranks), waited_ns_(new std::atomic<uint64_t>[ranks]) {
    for (size_t q = 0; q < ranks; ++q) waited_ns_[q].store(0, std::memory_order_relaxed);
  }
  // run_phase's transfers (indexed by peer rank): one message each way per peer, tagged `tag`.
  void start_phase(const std::vector<PeerTransfer>& transfers, const PhaseTag& tag, int me);
  // run_messages' queues (indexed by peer rank); with a gate, run_gated_messages'.
  void start_messages(const std::vector<PeerQueue>& queues, int me, const size_t* gate = nullptr);
  // Starts the held messages whose gate opened; whether any did.
  bool resume();
  // After a run that ended with an exception, whose queues (the caller's) may be
  // gone by the time fail_all finishes the message in flight: only that message
  // is left; nothing after it starts, and nothing is received any more.
  void forget_queues();
  // Some message waits for the gate.
  bool holding() const;
  // The payload bytes of every message sent in the run: what it put on the wire.
  uint64_t payload_sent() const;
  // The run's deadline passed on rank `me`: gcommTimeout naming the peers it still
  // waits to hear from and those that did not take its data.
  [[noreturn]] void fail_timeout(const std::string& what, int me) const;
  // Every message left waits for a gate that the work on what arrived did not
  // open: a schedule that cannot complete (a bug in gradcomm), gcommInternalError.
  [[noreturn]] void fail_held(const std::string& what, int me) const;

  // The wire waited `idle` for its peers (no byte could move): charged to every
  // peer with a message in flight either way, whose bytes it waited to read or
  // to hand over. A peer that is late, or whose link is slow, collects the most
  // (straggler attribution, reducer/straggler_monitor.hpp).
  void charge_wait(std::chrono::nanoseconds idle) noexcept;
  // Nanoseconds charged to peer q since the links were made; any thread.
  uint64_t waited_on_ns(size_t q) const noexcept { return waited_ns_[q].load(std::memory_order_relaxed); }

  MessageFlow& operator[](size_t q) { return flows_[q]; }
  const MessageFlow& operator[](size_t q) const { return flows_[q]; }
  size_t size() const { return flows_.size(); }

 private:
  std::vector<MessageFlow> flows_;
  std::vector<OutMessage> phase_out_;  // start_phase's one message each way per peer
  std::vector<InMessage> phase_in_;
  std::unique_ptr<std::atomic<uint64_t>[]> waited_ns_;  // per peer; read from other threads
};

}  // namespace gradcomm::comm
