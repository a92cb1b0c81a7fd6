#include "comm/mpi/mpi_links.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "comm/bootstrap/store_state.hpp"
#include "comm/exchange/phase_header.hpp"
#include "common/cpu_relax.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {

constexpr size_t kPieceBytes = size_t{1} << 30;  // MPI counts are ints
constexpr size_t kHeaderRoom = kPhaseHeaderBytes + kMaxReasonBytes;
constexpr std::chrono::microseconds kSpin(50);  // polling without sleeping first
constexpr std::chrono::microseconds kNap(20);   // then between polls

size_t pieces(size_t bytes) {
  return (bytes + kPieceBytes - 1) / kPieceBytes;
}
int piece_bytes(size_t bytes, size_t k) {
  return static_cast<int>(std::min(kPieceBytes, bytes - k * kPieceBytes));
}

}  // namespace

MpiLinks::MpiLinks(const MpiPlugin& mpi, int comm_f, int rank, int size, double timeout_s, int thread_level)
    : mpi_(mpi),
      comm_f_(comm_f),
      timeout_s_(timeout_s),
      rank_(rank),
      size_(size),
      thread_level_(thread_level),
      received_(size, 0) {}

MpiLinks::~MpiLinks() {
  cancel_pending();
  char err[256] = {};
  for (int& h : orphans_) (void)mpi_.request_free(&h, err, sizeof(err));
  if (mpi_.comm_free(comm_f_, err, sizeof(err)) != 0) GCOMM_WARN("MPI transport: ", err);
}

void MpiLinks::run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                         const std::string& what, const std::function<void()>& progress) {
  phase_out_.assign(size_, OutMessage{});
  phase_in_.assign(size_, InMessage{});
  std::vector<Lists> lists(size_);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const PeerTransfer& t = transfers[q];
    phase_out_[q] = OutMessage{t.out, t.out_bytes, tag};
    phase_in_[q] = InMessage{t.in, t.in_bytes, tag};
    lists[q] = Lists{&phase_out_[q], t.sends ? size_t{1} : 0, &phase_in_[q], t.receives ? size_t{1} : 0};
  }
  run(lists, deadline, what, progress);
}

void MpiLinks::run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                            const std::string& what) {
  std::vector<Lists> lists(size_);
  for (int q = 0; q < size_; ++q)
    if (q != rank_)
      lists[q] = Lists{queues[q].out.data(), queues[q].out.size(), queues[q].in.data(), queues[q].in.size()};
  run(lists, deadline, what, {});
}

void MpiLinks::post(const std::vector<Lists>& lists, const std::string& what) {
  char err[512] = {};
  auto add = [&](int rc, Request r) {
    if (rc != 0) mpi_failed(err, what);
    requests_.push_back(r);
  };
  for (int q = 0; q < size_; ++q) {
    const Lists& l = lists[q];
    for (size_t i = 0; i < l.n_out; ++i) {
      const OutMessage& m = l.outs[i];
      out_headers_.emplace_back(kPhaseHeaderBytes);
      encode_phase_header(m.tag, m.bytes, out_headers_.back().data());
      Request r{0, q, false, true, i, 0, 0, false};
      add(mpi_.isend(comm_f_, out_headers_.back().data(), static_cast<int>(kPhaseHeaderBytes), q, kHeaderTag,
                     &r.handle, err, sizeof(err)),
          r);
      for (size_t k = 0; k < pieces(m.bytes); ++k) {
        Request d{0, q, false, false, i, 0, 0, false};
        add(mpi_.isend(comm_f_, static_cast<const char*>(m.data) + k * kPieceBytes, piece_bytes(m.bytes, k),
                       q, kDataTag, &d.handle, err, sizeof(err)),
            d);
      }
    }
    for (size_t i = 0; i < l.n_in; ++i) {
      const InMessage& m = l.ins[i];
      in_headers_.emplace_back(kHeaderRoom);
      Request r{0, q, true, true, i, kPhaseHeaderBytes, in_headers_.size() - 1, false};
      add(mpi_.irecv(comm_f_, in_headers_.back().data(), static_cast<int>(kHeaderRoom), q, kHeaderTag,
                     &r.handle, err, sizeof(err)),
          r);
      for (size_t k = 0; k < pieces(m.bytes); ++k) {
        const int n = piece_bytes(m.bytes, k);
        Request d{0, q, true, false, i, static_cast<size_t>(n), 0, false};
        add(mpi_.irecv(comm_f_, static_cast<char*>(m.data) + k * kPieceBytes, n, q, kDataTag, &d.handle, err,
                       sizeof(err)),
            d);
      }
    }
  }
}

void MpiLinks::run(const std::vector<Lists>& lists, Deadline deadline, const std::string& what,
                   const std::function<void()>& progress) {
  if (failed_) fail(gcommRemoteError, what, ": the MPI transport failed earlier on rank ", rank_);
  requests_.clear();
  out_headers_.clear();
  in_headers_.clear();
  std::fill(received_.begin(), received_.end(), 0);
  try {
    // The headers' buffers must not move while their requests are pending.
    size_t n_out = 0, n_in = 0;
    for (const Lists& l : lists) {
      n_out += l.n_out;
      n_in += l.n_in;
    }
    out_headers_.reserve(n_out);
    in_headers_.reserve(n_in);
    post(lists, what);
    size_t pending = requests_.size();
    auto idle_since = Clock::now();
    char err[512] = {};
    while (pending > 0) {
      if (aborted_.load()) fail(gcommAborted, what, ": rank ", rank_, "'s communicator was aborted");
      bool moved = false;
      for (Request& r : requests_) {
        if (r.done) continue;
        int done = 0, bytes = 0;
        if (mpi_.test(&r.handle, &done, &bytes, err, sizeof(err)) != 0) {
          if (r.receive && !r.header) explain_with_header(r, lists, what);
          mpi_failed(err, what);
        }
        if (!done) continue;
        r.done = true;
        moved = true;
        --pending;
        if (r.receive && r.header) check_header(r, lists[r.peer], bytes, what);
        if (r.receive && !r.header) {
          if (static_cast<size_t>(bytes) != r.bytes) {
            explain_with_header(r, lists, what);
            fail(gcommRemoteError, what, ": rank ", r.peer, " sent ", bytes, " bytes where ", r.bytes,
                 " were expected (out of step)");
          }
          received_[r.peer] += r.bytes;
        }
      }
      if (moved) {
        idle_since = Clock::now();
        continue;
      }
      if (progress) progress();
      if (Clock::now() >= deadline) time_out(what);
      if (Clock::now() - idle_since < kSpin)
        cpu_relax();
      else
        std::this_thread::sleep_for(kNap);
    }
  } catch (...) {
    cancel_pending();
    throw;
  }
  uint64_t payload = 0;
  for (const Lists& l : lists)
    for (size_t i = 0; i < l.n_out; ++i) payload += l.outs[i].bytes;
  sent_.fetch_add(payload, std::memory_order_relaxed);
  requests_.clear();
}

void MpiLinks::explain_with_header(const Request& data, const std::vector<Lists>& lists,
                                   const std::string& what) {
  for (Request& h : requests_) {
    if (!(h.receive && h.header && h.peer == data.peer && h.message == data.message)) continue;
    int done = h.done ? 1 : 0, bytes = static_cast<int>(kPhaseHeaderBytes);
    char err[256] = {};
    if (!h.done && mpi_.test(&h.handle, &done, &bytes, err, sizeof(err)) != 0) return;
    if (!done) return;
    h.done = true;
    check_header(h, lists[h.peer], bytes, what);
  }
}

void MpiLinks::check_header(const Request& r, const Lists& l, int received, const std::string& what) {
  const uint8_t* h = in_headers_[r.slot].data();
  if (received >= static_cast<int>(kPhaseHeaderBytes) && is_failure_notice(h)) {
    const size_t n = std::min(failure_reason_bytes(h), static_cast<size_t>(received) - kPhaseHeaderBytes);
    fail(gcommRemoteError, what, ": rank ", r.peer,
         " failed: ", std::string(reinterpret_cast<const char*>(h) + kPhaseHeaderBytes, n));
  }
  if (received != static_cast<int>(kPhaseHeaderBytes))
    fail(gcommRemoteError, what, ": rank ", r.peer, " sent a header of ", received, " bytes (out of step)");
  const InMessage& m = l.ins[r.message];
  std::string why;
  const gcommStatus_t st = check_phase_header(h, m.tag, m.bytes, r.peer, rank_, why);
  if (st != gcommSuccess) fail(st, what, ": ", why);
}

void MpiLinks::time_out(const std::string& what) {
  std::vector<int> silent, stuck;
  for (const Request& r : requests_) {
    if (r.done) continue;
    std::vector<int>& list = r.receive ? silent : stuck;
    if (std::find(list.begin(), list.end(), r.peer) == list.end()) list.push_back(r.peer);
  }
  std::sort(silent.begin(), silent.end());
  std::sort(stuck.begin(), stuck.end());
  std::string detail;
  if (!silent.empty()) detail = cat("waiting for data from ", bootstrap::rank_list(silent));
  if (!stuck.empty())
    detail += cat(detail.empty() ? "" : "; ", bootstrap::rank_list(stuck), " did not take this rank's data");
  fail(gcommTimeout, what, " did not complete within the timeout on rank ", rank_, ": ", detail,
       " (MPI transport; a rank that is stuck, slower by more than the timeout, or calling other "
       "collectives)");
}

void MpiLinks::cancel_pending() noexcept {
  char err[256] = {};
  bool any = false;
  for (Request& r : requests_)
    if (!r.done) {
      (void)mpi_.cancel(r.handle, err, sizeof(err));
      any = true;
    }
  // All together, against one deadline each for receives and sends.
  const Deadline receives_until = deadline_after(timeout_s_), sends_until = deadline_after(1.0);
  while (any) {
    any = false;
    for (Request& r : requests_) {
      if (r.done) continue;
      int done = 0, bytes = 0;
      if (mpi_.test(&r.handle, &done, &bytes, err, sizeof(err)) != 0) done = 1;  // failed: it is over
      if (done) {
        r.done = true;
        continue;
      }
      if (Clock::now() < (r.receive ? receives_until : sends_until)) {
        any = true;
        continue;
      }
      r.done = true;
      if (r.receive) {
        // It may still write into the caller's buffer: never reuse these links.
        failed_ = true;
        orphans_.push_back(r.handle);
        GCOMM_WARN("MPI transport: rank ", rank_, ": a receive from rank ", r.peer,
                   " could be neither cancelled nor completed; the communicator cannot be used any more");
      } else {
        (void)mpi_.request_free(&r.handle, err, sizeof(err));
      }
    }
    if (any) std::this_thread::sleep_for(kNap);
  }
  requests_.clear();
}

void MpiLinks::mpi_failed(const char* err, const std::string& what) {
  fail(gcommRemoteError, what, ": rank ", rank_, ": ", err);
}

void MpiLinks::fail_all(const std::string& reason, double grace_s) noexcept {
  if (failed_) return;
  failed_ = true;
  try {
    // Kept until destruction: a send not taken within the second stays posted.
    notice_ = encode_failure_notice(reason);
    const std::vector<uint8_t>& notice = notice_;
    std::vector<int> handles;
    char err[256] = {};
    for (int q = 0; q < size_; ++q) {
      int h = 0;
      if (q != rank_ && mpi_.isend(comm_f_, notice.data(), static_cast<int>(notice.size()), q, kHeaderTag, &h,
                                   err, sizeof(err)) == 0)
        handles.push_back(h);
    }
    // Best effort, bounded: a peer that is gone never takes it.
    const Deadline until = deadline_after(grace_s);
    for (int& h : handles) {
      int done = 0, bytes = 0;
      while (!done && Clock::now() < until && mpi_.test(&h, &done, &bytes, err, sizeof(err)) == 0)
        if (!done) std::this_thread::sleep_for(kNap);
      if (!done) (void)mpi_.request_free(&h, err, sizeof(err));  // notice_ lives as long as the links
    }
  } catch (...) {
  }
}

}  // namespace gradcomm::comm
