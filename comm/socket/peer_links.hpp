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

#include "comm/net/tcp_socket.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm::sock {

struct PeerTransfer {
  const void* out = nullptr;  // sent to the peer (header first)
  size_t out_bytes = 0;
  bool sends = false;
  void* in = nullptr;  // received from the peer (after its header)
  size_t in_bytes = 0;
  bool receives = false;
};

// What every message of one phase says about the collective it belongs to.
struct PhaseTag {
  CallSignature sig;
  uint64_t seq = 0;
  uint32_t phase = 0;
};

// The wire format, for tests and fuzzers that play a peer: the 40-byte header of
// a phase message, and a failure notice (header + reason).
void encode_phase_header(const PhaseTag& tag, uint64_t payload_bytes, uint8_t* out);
std::vector<uint8_t> encode_failure_notice(const std::string& reason);

class PeerLinks {
 public:
  PeerLinks(std::vector<net::Socket> peers, int rank);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }

  // Runs one phase (transfers indexed by peer rank; this rank's entry is
  // ignored). Throws gcommInvalidArgument when a peer's header shows another
  // collective, gcommRemoteError when a peer closed its connection, gcommTimeout
  // at the deadline (naming the ranks not heard from), gcommAborted after
  // abort(). `what` names the collective for messages. `progress`, if set, is
  // called whenever the phase would otherwise wait for the network: work on what
  // has arrived so far (received_bytes) fills the time the peers take.
  void run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                 const std::string& what, const std::function<void()>& progress = {});
  // Payload bytes received so far from rank q in the phase being run.
  size_t received_bytes(int q) const {
    const Flow& f = flows_[q];
    return f.in_done > kHeaderBytes ? f.in_done - kHeaderBytes : 0;
  }

  // Shuts every connection down: peers blocked on this rank fail at once, and
  // so does a phase in progress here. Safe from any thread.
  void abort() noexcept;
  // After a failure of this rank's own (from the thread that runs the phases):
  // finishes the messages it was in the middle of sending (for at most a
  // second in all), tells every peer why (a failure notice, best effort), then
  // shuts every connection down. A peer then fails naming the root cause ("rank 0 failed: ... rank 1
  // closed its connection") instead of only "rank 0 closed its connection".
  void fail_all(const std::string& reason) noexcept;
  bool aborted() const { return aborted_.load(); }
  // Payload bytes of the phases completed so far (headers excluded).
  uint64_t payload_bytes_sent() const noexcept { return sent_.load(std::memory_order_relaxed); }

  static constexpr size_t kHeaderBytes = 40;

 private:
  // Progress of one peer's two messages in the current phase.
  struct Flow {
    uint8_t out_header[kHeaderBytes];
    uint8_t in_header[kHeaderBytes];
    size_t out_done = 0, out_total = 0;  // header + payload
    const void* out = nullptr;            // the payload
    size_t in_done = 0, in_total = 0;
    bool mid_send() const { return out_done > 0 && out_done < out_total; }
  };
  // One sendmsg of what is left of flow q's outgoing message; its result.
  ssize_t send_more(int q, int flags);
  [[noreturn]] void peer_gone(int q, const std::string& how, const std::string& what);
  void close_all() noexcept;

  std::vector<net::Socket> peers_;
  std::vector<Flow> flows_;
  int rank_;
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> sent_{0};  // read from any thread (gcommCommBytesSent)
};

}  // namespace gradcomm::comm::sock
