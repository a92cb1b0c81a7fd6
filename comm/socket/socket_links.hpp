// The byte streams of the socket transport once connected: one non-blocking TCP
// socket per peer, and the engine that runs one phase of a collective over them.
//
// A phase is, for each peer, at most one message out and one message in; all of
// them progress at once under one poll(), so no rank blocks on a single peer and
// no cycle of full socket buffers can form. Every message starts with a 40-byte
// header naming the collective (signature, sequence number, phase), checked on
// arrival: ranks that called different collectives are told so instead of
// reading each other's bytes as data. Each phase is bounded by a deadline; a
// peer that closes its connection, an abort from another thread, and a deadline
// that passes all end the phase at once with a message naming the ranks.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "comm/exchange/message_flows.hpp"
#include "comm/exchange/peer_exchange.hpp"
#include "comm/exchange/phase_header.hpp"
#include "comm/net/tcp_socket.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm::sock {

// The phase types and the header are comm/exchange/'s; named here too for the
// tests and fuzzers that play a peer.
using comm::encode_failure_notice;
using comm::encode_phase_header;
using comm::InMessage;
using comm::OutMessage;
using comm::PeerQueue;
using comm::PeerTransfer;
using comm::PhaseTag;

class SocketLinks final : public PeerExchange {
 public:
  SocketLinks(std::vector<net::Socket> peers, int rank);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }

  // Runs one phase (transfers indexed by peer rank; this rank's entry is
  // ignored). Throws gcommInvalidArgument when a peer's header shows another
  // collective, gcommRemoteError when a peer closed its connection, gcommTimeout
  // at the deadline (naming the ranks not heard from), gcommAborted after
  // abort(). `what` names the collective for messages. `progress`, if set, is
  // called whenever the phase would otherwise wait for the network: work on what
  // has arrived so far (received_bytes) fills the time the peers take.
  void run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                 const std::string& what, const std::function<void()>& progress = {}) override;
  // Any number of messages to and from each peer (queues indexed by peer rank;
  // this rank's entry is ignored), each peer's in order, every peer at once:
  // the sends and receives of a group (comm/p2p_group.hpp). Throws as run_phase.
  void run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                    const std::string& what) override;
  // Payload bytes received so far from rank q in the phase being run.
  size_t received_bytes(int q) const override { return flows_[q].received_bytes(); }
  bool runs_gated_messages() const override { return true; }
  // 32 KiB: a rank's TCP flows share its link unevenly, and with megabyte slices
  // the last piece waited for the slowest flow (4 ranks, 1 Gbit lab links: a
  // 16 MiB all-reduce at 1.06-1.08x the link's time, 1.00x with 32 KiB; exactly
  // 64 KiB was 3x slower at 10 Gbit; bench/results/2026-11-30-cpu-netlab-slices/).
  size_t pipelined_slice_bytes() const override { return size_t{32} << 10; }
  void run_gated_messages(const std::vector<PeerQueue>& queues, const size_t& gate, Deadline deadline,
                          const std::string& what, const std::function<void()>& progress) override;
  size_t messages_received(int q) const override { return flows_[q].in_completed(); }

  // Shuts every connection down: peers blocked on this rank fail at once, and
  // so does a phase in progress here. Safe from any thread.
  void abort() noexcept override;
  // After a failure of this rank's own (from the thread that runs the phases):
  // finishes the messages it was in the middle of sending (for at most
  // `grace_s` in all), tells every peer why (a failure notice, best effort), then
  // shuts every connection down. A peer then fails naming the root cause ("rank 0 failed: ... rank 1
  // closed its connection") instead of only "rank 0 closed its connection".
  void fail_all(const std::string& reason, double grace_s) noexcept override;
  bool aborted() const { return aborted_.load(); }
  // Payload bytes of the phases completed so far (headers excluded).
  uint64_t payload_bytes_sent() const noexcept override { return sent_.load(std::memory_order_relaxed); }
  bool waited_on_ns(int q, uint64_t& ns) const noexcept override {
    ns = flows_.waited_on_ns(static_cast<size_t>(q));
    return true;
  }

  static constexpr size_t kHeaderBytes = kPhaseHeaderBytes;

 private:
  // Under run_phase and the run_messages: flows_ are set up; move_flows is the loop,
  // and a run it ends with an exception leaves only the message in flight (forget_queues).
  void run_flows(Deadline deadline, const std::string& what, const std::function<void()>& progress);
  void move_flows(Deadline deadline, const std::string& what, const std::function<void()>& progress);
  // One sendmsg of what is left of flow q's outgoing message; its result.
  ssize_t send_more(int q, int flags);
  [[noreturn]] void peer_gone(int q, const std::string& how, const std::string& what);
  void close_all() noexcept;

  std::vector<net::Socket> peers_;
  MessageFlows flows_;
  int rank_;
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> sent_{0};  // read from any thread (gcommCommBytesSent)
};

}  // namespace gradcomm::comm::sock
