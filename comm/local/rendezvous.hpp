// The meeting point of the local transport's ranks (threads of one process):
// a barrier with a deadline, abort, and detection of ranks that call different
// collectives. Every wait is bounded by the timeout; a rank that times out or
// aborts poisons the group, so peers fail promptly instead of hanging.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "comm/transport.hpp"
#include "common/cpu_relax.hpp"
#include "common/deadline.hpp"

namespace gradcomm::comm {

class Rendezvous {
 public:
  Rendezvous(int nranks, double timeout_s);

  int size() const { return nranks_; }
  double timeout_s() const { return timeout_.count(); }

  // Waits until every rank arrived at this barrier (each rank calls it the same
  // number of times). Throws gcommTimeout naming the ranks that never arrived,
  // gcommAborted if this rank's transport was aborted, gcommRemoteError if a peer
  // failed first. `what` names the operation in messages (formatted only for one).
  void arrive_and_wait(int rank, const CallId& what);

  // Posts this rank's signature and pointers, waits for all, and checks that all
  // ranks called the same collective (gcommInvalidArgument on every rank if not).
  void exchange(int rank, const CallSignature& sig, const void* send, void* recv, const CallId& what);
  const void* send_of(int rank) const { return send_[rank]; }
  void* recv_of(int rank) const { return recv_[rank]; }

  // Marks the group failed (abort by `rank`, or a failure seen by it) and wakes
  // every waiter. Safe from any thread.
  void fail(int rank, gcommStatus_t status, const std::string& message) noexcept;
  bool failed() const;

  // For the point-to-point mailbox (comm/local/mailbox.hpp), which shares this
  // group's lock, wake-ups and failure state. The *_locked calls need lock() held.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(mutex_); }
  // Spins like arrive_and_wait (until the next notify_all) before it sleeps.
  template <class Pred>
  bool wait_until(std::unique_lock<std::mutex>& held, Deadline deadline, Pred pred) {
    if (pred()) return true;
    if (spin_.count() > 0) {
      const uint64_t seen = notified_.load(std::memory_order_acquire);
      held.unlock();
      const auto spin_end = Clock::now() + spin_;
      while (notified_.load(std::memory_order_acquire) == seen && Clock::now() < spin_end) cpu_relax();
      held.lock();
    }
    return cv_.wait_until(held, deadline, pred);
  }
  bool failed_locked() const { return failed_; }
  [[noreturn]] void throw_failure_locked(int rank) { throw_failure(rank); }
  void notify_all() {
    notified_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

 private:
  [[noreturn]] void throw_failure(int rank);

  const int nranks_;
  const std::chrono::duration<double> timeout_;
  // How long a waiting rank spins before it sleeps: 50 us when every rank can have
  // a core of its own, else 0, since a spinning rank would hold the core a late
  // rank needs. It spins with cpu_relax(), never sched_yield() (common/cpu_relax.hpp says why).
  const std::chrono::microseconds spin_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_generation_{0};  // generation_, for waiters that spin without the lock
  std::atomic<uint64_t> notified_{0};              // notify_all calls, for wait_until's spin
  int arrived_ = 0;
  std::vector<uint64_t> arrived_gen_;  // per rank: the last generation it arrived at
  bool failed_ = false;
  int failed_by_ = -1;
  gcommStatus_t failed_status_ = gcommSuccess;
  std::string failed_message_;
  std::vector<CallSignature> sig_;
  std::vector<const void*> send_;
  std::vector<void*> recv_;
};

}  // namespace gradcomm::comm
