#include "comm/shm/shm_links.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>

#include "common/cpu_relax.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::shm {

namespace {

constexpr size_t kHeaderBytes = kPhaseHeaderBytes;
// Spin this long after the last byte moved before sleeping on the doorbell: a
// futex wake-up costs tens of microseconds, a small message's round trip less.
constexpr std::chrono::microseconds kSpin(50);
// The longest sleep: between sleeps the deadline and the peers' processes are checked.
constexpr std::chrono::milliseconds kNap(100);

uint32_t* futex_word(std::atomic<uint32_t>& a) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex is a plain 32-bit word");
  return reinterpret_cast<uint32_t*>(&a);
}

// Sleeps while *word == seen, at most `nap` (shared between processes: no FUTEX_PRIVATE_FLAG).
void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::nanoseconds nap) {
  timespec ts{static_cast<time_t>(nap.count() / 1000000000), static_cast<long>(nap.count() % 1000000000)};
  (void)::syscall(SYS_futex, futex_word(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  (void)::syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// With more ranks on the host than cores this process may run on, a spinning rank
// holds the core that the rank it waits for needs: sleep at once there.
std::chrono::microseconds spin_for(int world) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  return cores > 0 && world > cores ? std::chrono::microseconds(0) : kSpin;
}

// This process's pid namespace (the inode of /proc/self/ns/pid), 0 when unknown.
uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

ShmLinks::ShmLinks(Segment segment, int rank)
    : segment_(std::move(segment)),
      rank_(rank),
      spin_(spin_for(segment_.world())),
      pid_namespace_(pid_namespace()),
      flows_(segment_.world()) {
  RankWords& me = segment_.rank_words(rank_);
  me.pid_ns.store(pid_namespace_, std::memory_order_release);
  me.pid.store(static_cast<int32_t>(::getpid()), std::memory_order_release);
}

ShmLinks::~ShmLinks() {
  close_all();
}

void ShmLinks::ring_doorbell(int q) noexcept {
  RankWords& w = segment_.rank_words(q);
  w.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (w.sleeping.load(std::memory_order_seq_cst) != 0) futex_wake_all(w.doorbell);
}

void ShmLinks::close_all() noexcept {
  segment_.rank_words(rank_).closed.store(1, std::memory_order_seq_cst);
  for (int q = 0; q < size(); ++q) ring_doorbell(q);  // this rank's too: a wait in another thread ends
}

void ShmLinks::abort() noexcept {
  aborted_.store(true);
  close_all();
}

size_t ShmLinks::ring_write(int to, const uint8_t* src, size_t bytes) {
  RingWords& w = segment_.ring(rank_, to);
  const size_t cap = segment_.ring_bytes();
  const uint64_t head = w.head.load(std::memory_order_relaxed);  // this rank's own counter
  const uint64_t tail = w.tail.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, cap - static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  uint8_t* data = segment_.ring_data(rank_, to);
  const size_t at = static_cast<size_t>(head % cap), first = std::min(n, cap - at);
  std::memcpy(data + at, src, first);
  std::memcpy(data, src + first, n - first);
  w.head.store(head + n, std::memory_order_release);
  return n;
}

size_t ShmLinks::ring_available(int from) const {
  const RingWords& w = segment_.ring(from, rank_);
  return static_cast<size_t>(w.head.load(std::memory_order_acquire) - w.tail.load(std::memory_order_relaxed));
}

size_t ShmLinks::ring_read(int from, uint8_t* dst, size_t bytes) {
  RingWords& w = segment_.ring(from, rank_);
  const size_t cap = segment_.ring_bytes();
  const uint64_t tail = w.tail.load(std::memory_order_relaxed);  // this rank's own counter
  const uint64_t head = w.head.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  const uint8_t* data = segment_.ring_data(from, rank_);
  const size_t at = static_cast<size_t>(tail % cap), first = std::min(n, cap - at);
  std::memcpy(dst, data + at, first);
  std::memcpy(dst + first, data, n - first);
  w.tail.store(tail + n, std::memory_order_release);
  return n;
}

size_t ShmLinks::send_more(int q) {
  MessageFlow& f = flows_[q];
  size_t moved = 0;
  while (f.out_done < f.out_total) {
    size_t n;
    if (f.out_done < kHeaderBytes)
      n = ring_write(q, f.out_header + f.out_done, kHeaderBytes - f.out_done);
    else
      n = ring_write(q, static_cast<const uint8_t*>(f.out) + (f.out_done - kHeaderBytes),
                     f.out_total - f.out_done);
    if (n == 0) break;
    f.out_done += n;
    moved += n;
    if (f.out_done == f.out_total) f.start_next_out();
  }
  return moved;
}

size_t ShmLinks::receive_more(int q, const std::string& what) {
  MessageFlow& f = flows_[q];
  size_t moved = 0;
  while (f.in_done < f.in_total) {
    const InMessage& m = f.in();
    size_t n;
    if (f.in_done < kHeaderBytes) {
      n = ring_read(q, f.in_header + f.in_done, kHeaderBytes - f.in_done);
    } else {
      n = ring_read(q, static_cast<uint8_t*>(m.data) + (f.in_done - kHeaderBytes), f.in_total - f.in_done);
    }
    if (n == 0) break;
    const size_t before = f.in_done;
    f.in_done += n;
    moved += n;
    if (before < kHeaderBytes && f.in_done >= kHeaderBytes) {  // the header is complete: check it once
      if (is_failure_notice(f.in_header))
        fail(gcommRemoteError, what, ": rank ", q, " failed: ", read_reason(q, f.in_header, nullptr, 0));
      std::string why;
      gcommStatus_t st = check_phase_header(f.in_header, m.tag, m.bytes, q, rank_, why);
      if (st != gcommSuccess) fail(st, what, ": ", why);
    }
    if (f.in_done == f.in_total) f.start_next_in();
  }
  return moved;
}

std::string ShmLinks::read_reason(int q, const uint8_t* header, const void* early, size_t have) {
  const size_t n = failure_reason_bytes(header);
  std::string reason =
      have > 0 ? std::string(static_cast<const char*>(early), std::min(have, n)) : std::string();
  const Deadline until = deadline_after(1.0);
  while (reason.size() < n && Clock::now() < until) {
    uint8_t chunk[256];
    const size_t got = ring_read(q, chunk, std::min(sizeof(chunk), n - reason.size()));
    if (got > 0) {
      reason.append(reinterpret_cast<const char*>(chunk), got);
      ring_doorbell(q);
    } else {
      cpu_relax();
    }
  }
  return reason;
}

// A peer's pid means something here only in this rank's pid namespace (ranks
// share one, or they could not have opened the segment; kept as a guard): where
// /proc cannot tell, the peer is never called gone; the timeout still ends the wait.
bool ShmLinks::process_gone(int q) const {
  const RankWords& peer = segment_.rank_words(q);
  const int32_t pid = peer.pid.load(std::memory_order_acquire);
  const uint64_t ns = peer.pid_ns.load(std::memory_order_acquire);
  if (pid <= 0 || ns == 0 || ns != pid_namespace_) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';  // killed and not yet reaped is gone too
}

// A peer's rings ended. If it said why first (a failure notice waiting at a
// message boundary of its ring to this rank), that is the message; else how.
void ShmLinks::peer_gone(int q, const std::string& how, const std::string& what) {
  if (aborted_.load()) fail(gcommAborted, what, ": rank ", rank_, "'s communicator was aborted");
  const MessageFlow& f = flows_[q];
  if ((f.in_done == 0 || f.in_done >= f.in_total) && ring_available(q) >= kHeaderBytes) {
    uint8_t h[kHeaderBytes];
    (void)ring_read(q, h, sizeof(h));
    if (is_failure_notice(h))
      fail(gcommRemoteError, what, ": rank ", q, " failed: ", read_reason(q, h, nullptr, 0));
  }
  fail(gcommRemoteError, what, ": rank ", q, " ", how,
       " (it exited, aborted or failed: its own error says why)");
}

void ShmLinks::fail_all(const std::string& reason, double grace_s) noexcept {
  if (!aborted_.load()) {
    try {
      const std::vector<uint8_t> notice = encode_failure_notice(reason);
      const Deadline until = deadline_after(grace_s);
      for (int q = 0; q < size(); ++q) {
        if (q == rank_) continue;
        // A peer that closed, or whose process is gone, reads nothing more: waiting
        // for it to take the rest of a message cost a killed peer's survivors the
        // whole grace (issue 44 #6). Its process is looked at every millisecond.
        Deadline next_look = Clock::now();
        auto peer_left = [&] {
          if (segment_.rank_words(q).closed.load() != 0) return true;
          const Deadline now = Clock::now();
          if (now < next_look) return false;
          next_look = now + std::chrono::milliseconds(1);
          return process_gone(q);
        };
        // Inside a message the peer would read the notice as data: finish the
        // message first (a live peer in this phase is reading it).
        while (flows_[q].mid_send() && Clock::now() < until) {
          if (send_more(q) > 0)
            ring_doorbell(q);
          else if (peer_left())
            break;
          else
            cpu_relax();
        }
        if (flows_[q].mid_send()) continue;
        // At least one try, even with no grace (a timeout): a notice that fits
        // the ring's room goes, and the peer fails naming the cause at once.
        size_t done = 0;
        do {
          const size_t n = ring_write(q, notice.data() + done, notice.size() - done);
          done += n;
          if (n > 0)
            ring_doorbell(q);
          else if (peer_left())
            break;
          else
            cpu_relax();
        } while (done < notice.size() && Clock::now() < until);
      }
    } catch (...) {  // the notice could not be made: the peers learn less
    }
  }
  close_all();
}

void ShmLinks::run_phase(std::vector<PeerTransfer>& transfers, const PhaseTag& tag, Deadline deadline,
                         const std::string& what, const std::function<void()>& progress) {
  flows_.start_phase(transfers, tag, rank_);
  run_flows(deadline, what, progress);
}

void ShmLinks::run_messages(const std::vector<PeerQueue>& queues, Deadline deadline,
                            const std::string& what) {
  flows_.start_messages(queues, rank_);
  run_flows(deadline, what, {});
}

void ShmLinks::run_gated_messages(const std::vector<PeerQueue>& queues, const size_t& gate, Deadline deadline,
                                  const std::string& what, const std::function<void()>& progress) {
  flows_.start_messages(queues, rank_, &gate);
  run_flows(deadline, what, progress);
}

void ShmLinks::run_flows(Deadline deadline, const std::string& what, const std::function<void()>& progress) {
  try {
    move_flows(deadline, what, progress);
  } catch (...) {
    flows_.forget_queues();  // the caller's queues may be gone by the time fail_all runs
    throw;
  }
}

void ShmLinks::move_flows(Deadline deadline, const std::string& what, const std::function<void()>& progress) {
  const int n = size();
  RankWords& me = segment_.rank_words(rank_);
  auto spin_end = Clock::now() + spin_;
  auto next_liveness_check = Clock::now() + kNap;
  // Since when nothing could move (the spins and sleeps below): charged to the
  // peers in flight when the next look at the rings begins.
  std::optional<Clock::time_point> idle_since;
  for (;;) {
    if (aborted_.load()) fail(gcommAborted, what, ": rank ", rank_, "'s communicator was aborted");
    if (idle_since) {
      flows_.charge_wait(Clock::now() - *idle_since);
      idle_since.reset();
    }
    // Read before looking at the rings: news that lands after this changes it,
    // so the sleep below cannot miss it.
    const uint32_t bell = me.doorbell.load(std::memory_order_seq_cst);
    bool active = false, held = false, moved = false;  // some flow moves bytes, waits for the gate, moved
    for (int q = 0; q < n; ++q) {
      MessageFlow& f = flows_[q];
      if (f.receiving() || f.sending()) {
        const size_t got = receive_more(q, what);
        const size_t put = send_more(q);
        if (got + put > 0) {
          moved = true;
          ring_doorbell(q);  // data to read, or room to write
        }
      }
      active = active || f.receiving() || f.sending();
      held = held || f.holding();
    }
    if (!active && !held) {
      sent_.fetch_add(flows_.payload_sent(), std::memory_order_relaxed);
      return;
    }
    // A phase's progress fills idle time; a gated run's also opens the gate, so it
    // runs while data moves too (else a reduced slice would wait until every
    // incoming message had arrived, and the peers waiting for it with them).
    if (progress && (!moved || held)) progress();
    if (held && flows_.resume()) continue;  // the gate opened: move the messages it let through
    const auto now = Clock::now();
    if (moved) {
      spin_end = now + spin_;
      continue;
    }
    if (!active) flows_.fail_held(what, rank_);
    // Nothing moved: a peer that closed (or whose process is gone) never will.
    const bool check_processes = now >= next_liveness_check;
    if (check_processes) next_liveness_check = now + kNap;
    for (int q = 0; q < n; ++q) {
      const MessageFlow& f = flows_[q];
      if (f.in_done >= f.in_total && f.out_done >= f.out_total) continue;
      const bool closed = segment_.rank_words(q).closed.load(std::memory_order_seq_cst) != 0;
      if (!closed && !(check_processes && process_gone(q))) continue;
      if (receive_more(q, what) > 0) {  // what it wrote before it closed or went
        moved = true;
        continue;
      }
      peer_gone(q, closed ? "closed its communicator" : "is gone (its process exited or was killed)", what);
    }
    if (moved) continue;
    if (now >= deadline) flows_.fail_timeout(what, rank_);
    idle_since = now;
    if (now < spin_end) {
      cpu_relax();
      continue;
    }
    me.sleeping.store(1, std::memory_order_seq_cst);
    if (me.doorbell.load(std::memory_order_seq_cst) == bell && !aborted_.load())
      futex_wait(me.doorbell, bell, std::min<std::chrono::nanoseconds>(kNap, deadline - now));
    me.sleeping.store(0, std::memory_order_relaxed);
  }
}

}  // namespace gradcomm::comm::shm
