// The MPI transport's wire: the PeerExchange of comm/exchange/ over MPI's
// non-blocking point-to-point calls on a duplicate of the caller's MPI
// communicator (through libgradcomm_mpi.so.0: comm/mpi/mpi_plugin.hpp). Each
// message is its 40-byte header (tag kHeaderTag) and its payload straight from
// and into the caller's buffer (tag kDataTag, in pieces of at most 1 GiB: MPI
// counts are ints); MPI keeps each pair's messages of one tag in order, which is
// all the phases need. Every wait polls MPI_Test, so it is bounded by the
// deadline and ends at an abort from another thread. Before a failed call
// returns, its pending requests are cancelled and waited for together: receives
// up to the timeout (a receive MPI can neither cancel nor complete by then stays
// posted, and the links refuse every later call), sends up to a second (MPI
// seldom cancels a send: one still posted may be read by a late peer, so after
// a failure the caller's send buffers must outlive the communicator). A rank
// that fails sends its peers a failure notice on the header tag (its reason),
// as the socket transport does.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/exchange/peer_exchange.hpp"
#include "comm/mpi/mpi_plugin.hpp"

namespace gradcomm::comm {

class MpiLinks final : public PeerExchange {
 public:
  // Takes ownership of `comm_f`, a duplicate communicator freed on destruction.
  // thread_level: what MPI was initialized with (0-3, MPI_THREAD_MULTIPLE = 3).
  MpiLinks(const MpiPlugin& mpi, int comm_f, int rank, int size, double timeout_s, int thread_level);
  ~MpiLinks() override;
  MpiLinks(const MpiLinks&) = delete;
  MpiLinks& operator=(const MpiLinks&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                 const std::string& what, const std::function<void()>& progress) override;
  void run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                    const std::string& what) override;
  size_t received_bytes(int q) const override { return received_[q]; }
  void abort() noexcept override { aborted_.store(true); }
  void fail_all(const std::string& reason, double grace_s) noexcept override;
  uint64_t payload_bytes_sent() const noexcept override { return sent_.load(std::memory_order_relaxed); }
  bool other_threads_may_call() const noexcept override { return thread_level_ >= 3; }

  static constexpr int kHeaderTag = 0x4743;  // below MPI_TAG_UB's guaranteed 32767
  static constexpr int kDataTag = 0x4744;

 private:
  // One peer's messages of a run: spans into the caller's queues.
  struct Lists {
    const OutMessage* outs = nullptr;
    size_t n_out = 0;
    const InMessage* ins = nullptr;
    size_t n_in = 0;
  };
  // A posted MPI request, and what it carries.
  struct Request {
    int handle = 0;  // the MPI request's Fortran handle
    int peer = 0;
    bool receive = false;
    bool header = false;
    size_t message = 0;  // index into the peer's outs or ins
    size_t bytes = 0;    // expected, for a receive
    size_t slot = 0;     // header receive: its buffer in in_headers_
    bool done = false;
  };
  void run(const std::vector<Lists>& lists, Deadline deadline, const std::string& what,
           const std::function<void()>& progress);
  void post(const std::vector<Lists>& lists, const std::string& what);
  // A payload that failed or has the wrong size: its header, if it arrived, says
  // why (another collective, another count): thrown from there.
  void explain_with_header(const Request& data, const std::vector<Lists>& lists, const std::string& what);
  // A completed header receive: a failure notice, or a header that must match.
  void check_header(const Request& r, const Lists& l, int received, const std::string& what);
  [[noreturn]] void time_out(const std::string& what);
  void cancel_pending() noexcept;
  [[noreturn]] void mpi_failed(const char* err, const std::string& what);

  const MpiPlugin& mpi_;
  int comm_f_;
  double timeout_s_;
  std::vector<int> orphans_;  // receives neither cancelled nor completed: never reused
  int rank_, size_;
  int thread_level_;
  std::vector<Request> requests_;
  std::vector<std::vector<uint8_t>> out_headers_;  // kept until their sends complete
  std::vector<std::vector<uint8_t>> in_headers_;   // room for a failure notice
  std::vector<OutMessage> phase_out_;              // run_phase's one message each way per peer
  std::vector<InMessage> phase_in_;
  std::vector<size_t> received_;  // payload bytes per peer in the current run
  std::atomic<bool> aborted_{false};
  bool failed_ = false;          // fail_all ran: nothing more goes through
  std::vector<uint8_t> notice_;  // the failure notice fail_all sent
  std::atomic<uint64_t> sent_{0};
};

}  // namespace gradcomm::comm
