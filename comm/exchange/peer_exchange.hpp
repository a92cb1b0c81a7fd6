// What a host transport of separate processes needs from its wire: run one
// phase of a collective (at most one message each way with every peer, all at
// once), or queues of messages per peer (a group's sends and receives), with a
// deadline, abort, and a failure notice to the peers. The collectives are
// written once over it (comm/exchange/exchange_transport.*); the socket
// transport's TCP connections (comm/socket/socket_links.*) and MPI's
// point-to-point calls (comm/mpi/mpi_links.*) implement it.
//
// Every message carries a header (comm/exchange/phase_header.hpp) naming the
// collective, its number and phase, or the send it belongs to; a receiver
// checks it, so ranks that called different collectives are told so instead of
// reading each other's bytes as data.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/transport.hpp"
#include "common/deadline.hpp"

namespace gradcomm::comm {

// One peer's part of a phase: at most one message each way.
struct PeerTransfer {
  const void* out = nullptr;  // sent to the peer (header first)
  size_t out_bytes = 0;
  bool sends = false;
  void* in = nullptr;  // received from the peer (after its header)
  size_t in_bytes = 0;
  bool receives = false;
};

// What every message of one phase says about the collective it belongs to.
// A send's message: sig is the send's (root = the receiver), seq the number of
// messages sent before it on this pair of ranks, phase 0.
struct PhaseTag {
  CallSignature sig;
  uint64_t seq = 0;
  uint32_t phase = 0;
};

// Messages of run_messages: each peer's go out, and come in, in order.
// `after` holds a message of run_gated_messages back until the run's gate reaches
// it: an outgoing one until its data is computed, an incoming one until the
// buffer it lands in is free again.
struct OutMessage {
  const void* data = nullptr;
  size_t bytes = 0;
  PhaseTag tag;  // sent in its header
  size_t after = 0;
};
struct InMessage {
  void* data = nullptr;
  size_t bytes = 0;
  PhaseTag tag;  // its header must say this
  size_t after = 0;
};
struct PeerQueue {
  std::vector<OutMessage> out;
  std::vector<InMessage> in;
};

// A collective larger than this goes in pieces of it (bounds the scratch memory).
inline constexpr size_t kExchangePieceBytes = size_t{8} << 20;

class PeerExchange {
 public:
  virtual ~PeerExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Runs one phase (transfers indexed by peer rank; this rank's entry is
  // ignored). Throws gcommInvalidArgument when a peer's header shows another
  // collective, gcommRemoteError when a peer failed or is gone, gcommTimeout at
  // the deadline (naming the ranks not heard from), gcommAborted after abort().
  // `what` names the collective for messages. `progress`, if set, is called
  // whenever the phase would otherwise wait: work on what has arrived so far
  // (received_bytes) fills the time the peers take.
  virtual void run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                         const std::string& what, const std::function<void()>& progress) = 0;
  // Any number of messages to and from each peer (queues indexed by peer rank;
  // this rank's entry is ignored), each peer's in order, every peer at once.
  virtual void run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                            const std::string& what) = 0;
  // Payload bytes received so far from rank q in the phase being run.
  virtual size_t received_bytes(int q) const = 0;

  // Whether run_gated_messages works on this wire. A wire that posts every
  // message up front (MPI) cannot hold one back; the collectives then run phase
  // by phase.
  virtual bool runs_gated_messages() const { return false; }
  // The pipelined all-reduce's message to one peer: a slice of this many bytes
  // (a piece is one slice per rank). Small enough that the uneven shares of a
  // rank's flows leave the last piece a short tail, large enough that the
  // per-message cost stays small: each wire measures its own (docs/comm.md).
  // By default a piece is kExchangePieceBytes, as phase by phase.
  virtual size_t pipelined_slice_bytes() const {
    return kExchangePieceBytes / static_cast<size_t>(std::max(size(), 1));
  }
  // run_messages whose messages wait for `gate`: each peer's next message each
  // way starts once gate >= its `after`. `progress` is called whenever the run
  // would wait, and when every message left is held; it advances the gate with
  // the work that the messages received so far allow (messages_received,
  // received_bytes). This pipelines a collective: the wire carries one piece
  // while the previous one is reduced, with no phase boundary where a link
  // idles. A run whose held messages `progress` cannot release fails with
  // gcommInternalError instead of waiting for ever.
  virtual void run_gated_messages(const std::vector<PeerQueue>& queues, const size_t& gate, Deadline deadline,
                                  const std::string& what, const std::function<void()>& progress);
  // Messages of the run received completely from rank q so far; received_bytes(q)
  // counts the one after them.
  virtual size_t messages_received(int q) const;

  // Makes a phase in progress, and every later one, fail. Safe from any thread.
  virtual void abort() noexcept = 0;
  // After a failure of this rank's own (from the thread that runs the phases):
  // tells every peer why (best effort, for at most `grace_s` seconds), so that
  // they fail naming the root cause instead of at their timeout; nothing more
  // goes through after it. A timeout passes 0: the call fails at its timeout.
  virtual void fail_all(const std::string& reason, double grace_s) noexcept = 0;
  // Payload bytes of the phases completed so far (headers excluded); any thread.
  virtual uint64_t payload_bytes_sent() const noexcept = 0;
  // Nanoseconds this rank's runs have waited on rank q since the links were made
  // (MessageFlows::charge_wait); any thread. False: this wire cannot tell.
  virtual bool waited_on_ns(int /*q*/, uint64_t& /*ns*/) const noexcept { return false; }
  // Transport::other_threads_may_call.
  virtual bool other_threads_may_call() const noexcept { return true; }
};

}  // namespace gradcomm::comm
