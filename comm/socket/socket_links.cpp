#include "comm/socket/socket_links.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "comm/bootstrap/store_state.hpp"
#include "comm/exchange/phase_header.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::sock {

using namespace bootstrap;
using namespace net;

namespace {

constexpr size_t kHeaderBytes = SocketLinks::kHeaderBytes;
constexpr std::chrono::microseconds kSpin(50);  // run_flows' non-sleeping wait

// Fills up to two iovecs with what is left of [header | payload] from `done` on.
int remaining(uint8_t* header, void* payload, size_t payload_bytes, size_t done, iovec* v) {
  int n = 0;
  if (done < kHeaderBytes) v[n++] = iovec{header + done, kHeaderBytes - done};
  size_t from = done > kHeaderBytes ? done - kHeaderBytes : 0;
  if (payload_bytes > from) v[n++] = iovec{static_cast<char*>(payload) + from, payload_bytes - from};
  return n;
}

// The reason of a failure notice whose header is at `h`: the part of its payload
// already read (`have` bytes at `early`), then the rest, read with a short deadline.
std::string read_reason(const Socket& s, const uint8_t* h, const void* early, size_t have) {
  size_t n = failure_reason_bytes(h);
  std::string reason =
      have > 0 ? std::string(static_cast<const char*>(early), std::min(have, n)) : std::string();
  if (reason.size() < n) {
    std::string rest(n - reason.size(), '\0');
    std::string error;
    if (recv_exact(s, rest.data(), rest.size(), deadline_after(1.0), error) == IoResult::kOk) reason += rest;
  }
  return reason;
}

}  // namespace

SocketLinks::SocketLinks(std::vector<Socket> peers, int rank)
    : peers_(std::move(peers)), flows_(peers_.size()), rank_(rank) {}

void SocketLinks::abort() noexcept {
  aborted_.store(true);
  close_all();
}

void SocketLinks::fail_all(const std::string& reason, double grace_s) noexcept {
  if (!aborted_.load()) {
    const std::vector<uint8_t> notice = encode_failure_notice(reason);
    const Deadline until = deadline_after(grace_s);
    for (size_t q = 0; q < peers_.size(); ++q) {
      if (!peers_[q].valid()) continue;
      MessageFlow& f = flows_[q];
      // Inside a message the peer would read the notice as data: finish the
      // message first (a live peer in this phase is reading it).
      while (f.mid_send()) {
        ssize_t sent = send_more(static_cast<int>(q), MSG_DONTWAIT);
        if (sent > 0 || (sent < 0 && errno == EINTR)) continue;
        if (sent == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) break;
        pollfd p{peers_[q].fd(), POLLOUT, 0};
        const int ready = ::poll(&p, 1, poll_ms_until(until));
        if (ready < 0 && errno == EINTR) continue;  // a signal, not a verdict: `until` still bounds the wait
        if (ready <= 0) break;
      }
      if (f.mid_send()) continue;
      // The message's tail may still fill the socket buffer: wait for room (bounded)
      // rather than drop the notice, which is the peer's only account of why.
      try {
        std::string error;
        (void)net::send_all(peers_[q], notice.data(), notice.size(), until, error);
      } catch (...) {  // its error text could not be made: the peer learns less
      }
    }
  }
  close_all();
}

// A peer's connection ended. If it said why first (a failure notice waiting at a
// message boundary of its stream), that is the message; else how it ended.
void SocketLinks::peer_gone(int q, const std::string& how, const std::string& what) {
  if (aborted_.load()) fail(gcommAborted, what, ": rank ", rank_, "'s communicator was aborted");
  const MessageFlow& f = flows_[q];
  if (f.in_done == 0 || f.in_done >= f.in_total) {
    uint8_t h[kHeaderBytes];
    ssize_t got = ::recv(peers_[q].fd(), h, sizeof(h), MSG_DONTWAIT | MSG_PEEK);
    if (got == static_cast<ssize_t>(sizeof(h)) && is_failure_notice(h)) {
      (void)::recv(peers_[q].fd(), h, sizeof(h), MSG_DONTWAIT);
      fail(gcommRemoteError, what, ": rank ", q, " failed: ", read_reason(peers_[q], h, nullptr, 0));
    }
  }
  fail(gcommRemoteError, what, ": rank ", q, " ", how,
       " (it exited, aborted or failed: its own error says why)");
}

ssize_t SocketLinks::send_more(int q, int flags) {
  MessageFlow& f = flows_[q];
  iovec v[2];
  int nv = remaining(f.out_header, const_cast<void*>(f.out), f.out_total - kHeaderBytes, f.out_done, v);
  msghdr m{};
  m.msg_iov = v;
  m.msg_iovlen = static_cast<size_t>(nv);
  ssize_t sent = ::sendmsg(peers_[q].fd(), &m, flags | MSG_NOSIGNAL);
  if (sent > 0) f.out_done += static_cast<size_t>(sent);
  return sent;
}

void SocketLinks::close_all() noexcept {
  for (Socket& s : peers_)
    if (s.valid()) (void)::shutdown(s.fd(), SHUT_RDWR);
}

void SocketLinks::run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                            const std::string& what, const std::function<void()>& progress) {
  flows_.start_phase(transfers, tag, rank_);
  run_flows(deadline, what, progress);
}

void SocketLinks::run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                               const std::string& what) {
  flows_.start_messages(queues, rank_);
  run_flows(deadline, what, {});
}

void SocketLinks::run_gated_messages(const std::vector<PeerQueue>& queues, const size_t& gate,
                                     Deadline deadline, const std::string& what,
                                     const std::function<void()>& progress) {
  flows_.start_messages(queues, rank_, &gate);
  run_flows(deadline, what, progress);
}

void SocketLinks::run_flows(Deadline deadline, const std::string& what,
                            const std::function<void()>& progress) {
  try {
    move_flows(deadline, what, progress);
  } catch (...) {
    flows_.forget_queues();  // the caller's queues may be gone by the time fail_all runs
    throw;
  }
}

void SocketLinks::move_flows(Deadline deadline, const std::string& what,
                             const std::function<void()>& progress) {
  const int n = size();
  MessageFlows& flows = flows_;
  std::vector<pollfd> fds;
  std::vector<int> who;
  // Small messages usually arrive within microseconds: poll without sleeping for
  // a short while before poll() may put the thread to sleep, whose wake-up costs
  // tens of microseconds. No sched_yield() between polls: common/cpu_relax.hpp says why.
  const auto spin_end = Clock::now() + kSpin;
  for (;;) {
    if (aborted_.load()) fail(gcommAborted, what, ": rank ", rank_, "'s communicator was aborted");
    fds.clear();
    who.clear();
    for (int q = 0; q < n; ++q) {
      const MessageFlow& f = flows[q];
      short events = 0;
      if (f.out_done < f.out_total) events |= POLLOUT;
      if (f.in_done < f.in_total) events |= POLLIN;
      if (events == 0) continue;
      fds.push_back(pollfd{peers_[q].fd(), events, 0});
      who.push_back(q);
    }
    if (fds.empty() && !flows.holding()) {
      sent_.fetch_add(flows.payload_sent(), std::memory_order_relaxed);
      return;
    }
    if (progress) progress();
    if (flows.resume()) continue;  // the gate opened: poll for the messages it let through
    if (fds.empty()) flows.fail_held(what, rank_);
    const auto before_poll = Clock::now();
    const bool spin = before_poll < spin_end;
    int rc = ::poll(fds.data(), fds.size(), spin ? 0 : poll_ms_until(deadline));
    flows.charge_wait(Clock::now() - before_poll);  // until poll returned, no byte could move
    if (rc < 0) {
      if (errno == EINTR) continue;
      fail(gcommInternalError, what, ": poll() failed: ", errno_text(errno));
    }
    if (rc == 0 && spin) continue;
    if (rc == 0 && Clock::now() >= deadline) flows.fail_timeout(what, rank_);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int q = who[i];
      MessageFlow& f = flows[q];
      const int fd = fds[i].fd;
      while (f.in_done < f.in_total) {
        const InMessage& m = f.in();
        iovec v[2];
        int nv = remaining(f.in_header, m.data, m.bytes, f.in_done, v);
        msghdr msg{};
        msg.msg_iov = v;
        msg.msg_iovlen = static_cast<size_t>(nv);
        ssize_t got = ::recvmsg(fd, &msg, 0);
        if (got == 0) peer_gone(q, "closed its connection", what);
        if (got < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          peer_gone(q, cat("broke its connection (", errno_text(errno), ")"), what);
        }
        const size_t before = f.in_done;
        f.in_done += static_cast<size_t>(got);
        if (before < kHeaderBytes && f.in_done >= kHeaderBytes) {  // the header is complete: check it once
          if (is_failure_notice(f.in_header))
            fail(gcommRemoteError, what, ": rank ", q,
                 " failed: ", read_reason(peers_[q], f.in_header, m.data, f.in_done - kHeaderBytes));
          std::string why;
          gcommStatus_t st = check_phase_header(f.in_header, m.tag, m.bytes, q, rank_, why);
          if (st != gcommSuccess) fail(st, what, ": ", why);
        }
        if (f.in_done == f.in_total) f.start_next_in();
      }
      while (f.out_done < f.out_total) {
        ssize_t sent = send_more(q, 0);
        if (sent >= 0) {
          if (f.out_done == f.out_total) f.start_next_out();
          continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        peer_gone(q, cat("broke its connection (", errno_text(errno), ")"), what);
      }
    }
  }
}

}  // namespace gradcomm::comm::sock
