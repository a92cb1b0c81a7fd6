// The shm transport's wire: the PeerExchange of comm/exchange/ over the byte rings
// of a shared segment (comm/shm/shm_segment.hpp), one ring per ordered pair of
// ranks. A message is the 40-byte phase header and its payload written into the
// ring as they fit and read out as they arrive, so a message of any size streams
// through a ring of a few MiB; every peer's messages of a phase progress at once,
// so no cycle of full rings can form. The collectives are the socket transport's
// (the same bits); what changes is that a byte crosses by two memory copies
// instead of two trips through the kernel's TCP stack.
//
// Waiting: a rank spins for a moment (small messages arrive within microseconds),
// then sleeps on its doorbell, a futex word its peers ring after writing to it or
// reading from it, at most 100 ms at a time: between sleeps it checks the deadline
// and whether a peer's process is gone. A peer that fails tells why (a failure
// notice at a message boundary of its rings) and marks itself closed; one killed
// outright is noticed by its process id; one stopped is named at the deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "comm/exchange/message_flows.hpp"
#include "comm/exchange/peer_exchange.hpp"
#include "comm/exchange/phase_header.hpp"
#include "comm/shm/shm_segment.hpp"

namespace gradcomm::comm::shm {

class ShmLinks final : public PeerExchange {
 public:
  // Takes the mapped segment; records this rank's process id in it.
  ShmLinks(Segment segment, int rank);
  // Marks this rank closed and wakes its peers: one still waiting on it fails.
  ~ShmLinks() override;
  ShmLinks(const ShmLinks&) = delete;
  ShmLinks& operator=(const ShmLinks&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return segment_.world(); }
  void run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                 const std::string& what, const std::function<void()>& progress) override;
  void run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                    const std::string& what) override;
  size_t received_bytes(int q) const override { return flows_[q].received_bytes(); }
  bool runs_gated_messages() const override { return true; }
  void run_gated_messages(const std::vector<PeerQueue>& queues, const size_t& gate, Deadline deadline,
                          const std::string& what, const std::function<void()>& progress) override;
  size_t messages_received(int q) const override { return flows_[q].in_completed(); }
  void abort() noexcept override;
  void fail_all(const std::string& reason, double grace_s) noexcept override;
  uint64_t payload_bytes_sent() const noexcept override { return sent_.load(std::memory_order_relaxed); }
  bool waited_on_ns(int q, uint64_t& ns) const noexcept override {
    ns = flows_.waited_on_ns(static_cast<size_t>(q));
    return true;
  }

 private:
  // As SocketLinks': move_flows is the loop; a run it ends with an exception leaves
  // only the message in flight (forget_queues).
  void run_flows(Deadline deadline, const std::string& what, const std::function<void()>& progress);
  void move_flows(Deadline deadline, const std::string& what, const std::function<void()>& progress);
  // Moves what fits of flow q's outgoing message into its ring; bytes moved.
  size_t send_more(int q);
  // Moves what has arrived of flow q's incoming message out of its ring (checking
  // the header once it is complete); bytes moved.
  size_t receive_more(int q, const std::string& what);
  size_t ring_write(int to, const uint8_t* src, size_t bytes);
  size_t ring_read(int from, uint8_t* dst, size_t bytes);
  size_t ring_available(int from) const;
  // A failure notice's reason: `have` bytes already read at `early`, the rest from the ring.
  std::string read_reason(int q, const uint8_t* header, const void* early, size_t have);
  [[noreturn]] void peer_gone(int q, const std::string& how, const std::string& what);
  bool process_gone(int q) const;
  void ring_doorbell(int q) noexcept;
  void close_all() noexcept;

  Segment segment_;
  int rank_;
  std::chrono::microseconds spin_;  // how long a wait spins before it sleeps
  uint64_t pid_namespace_;          // this process's: peers' pids are checked only within it
  MessageFlows flows_;
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> sent_{0};
};

}  // namespace gradcomm::comm::shm
