#include "comm/local/rendezvous.hpp"

#include <sched.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "common/cpu_relax.hpp"
#include "common/deadline.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {

constexpr std::chrono::microseconds kSpin(50);

// The cores this process may run on (its affinity mask), at least 1.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

Rendezvous::Rendezvous(int nranks, double timeout_s)
    : nranks_(nranks),
      timeout_(timeout_s),
      spin_(nranks <= usable_cores() ? kSpin : std::chrono::microseconds(0)),
      arrived_gen_(nranks, 0),
      sig_(nranks),
      send_(nranks, nullptr),
      recv_(nranks, nullptr) {}

bool Rendezvous::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

void Rendezvous::fail(int rank, gcommStatus_t status, const std::string& message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_) {
      failed_ = true;
      failed_by_ = rank;
      failed_status_ = status;
      failed_message_ = message;
    }
  } catch (...) {
  }
  notify_all();
}

void Rendezvous::throw_failure(int rank) {
  if (failed_by_ == rank)
    gradcomm::fail(failed_status_ == gcommTimeout ? gcommTimeout : gcommAborted, failed_message_);
  gradcomm::fail(gcommRemoteError, "rank ", failed_by_, " failed: ", failed_message_);
}

void Rendezvous::arrive_and_wait(int rank, const CallId& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (failed_) throw_failure(rank);
  uint64_t gen = generation_;
  arrived_gen_[rank] = gen + 1;
  if (++arrived_ == nranks_) {
    arrived_ = 0;
    ++generation_;
    published_generation_.store(generation_, std::memory_order_release);
    cv_.notify_all();
    return;
  }
  // The ranks of one collective usually arrive within microseconds of each other:
  // spin a little before the condition variable, whose wake-up costs tens to
  // hundreds of microseconds (see spin_ in the header for when and how).
  if (spin_.count() > 0) {
    lock.unlock();
    const auto spin_end = std::chrono::steady_clock::now() + spin_;
    while (published_generation_.load(std::memory_order_acquire) == gen &&
           std::chrono::steady_clock::now() < spin_end)
      cpu_relax();
    lock.lock();
    if (generation_ != gen) return;  // completed while spinning
  }
  auto deadline = deadline_after(timeout_.count());
  bool done = cv_.wait_until(lock, deadline, [&] { return generation_ != gen || failed_; });
  if (generation_ != gen) return;  // completed (even if someone failed right after)
  if (failed_) throw_failure(rank);
  if (!done) {
    std::ostringstream missing;
    int n_missing = 0;
    for (int r = 0; r < nranks_; ++r)
      if (arrived_gen_[r] != gen + 1) missing << (n_missing++ ? "," : "") << r;
    std::string msg = cat(what, ": rank", n_missing > 1 ? "s " : " ", missing.str(), " never arrived within ",
                          timeout_.count(),
                          " s (local transport; every rank's thread must call the same collectives "
                          "in the same order)");
    lock.unlock();
    fail(rank, gcommTimeout, msg);
    GCOMM_WARN(msg);
    gradcomm::fail(gcommTimeout, msg);
  }
}

void Rendezvous::exchange(int rank, const CallSignature& sig, const void* send, void* recv,
                          const CallId& what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sig_[rank] = sig;
    send_[rank] = send;
    recv_[rank] = recv;
  }
  arrive_and_wait(rank, what);
  // Every rank compares every signature after the same barrier: all agree.
  std::unique_lock<std::mutex> lock(mutex_);
  for (int r = 0; r < nranks_; ++r) {
    if (sig_[r] == sig_[0]) continue;
    std::string msg = cat(what, ": ranks called different collectives: rank 0 called ", describe(sig_[0]),
                          ", rank ", r, " called ", describe(sig_[r]));
    lock.unlock();
    // Wait for every rank to read the signatures before anyone may overwrite them.
    arrive_and_wait(rank, what);
    gradcomm::fail(gcommInvalidArgument, msg);
  }
}

}  // namespace gradcomm::comm
