// A job whose threads are interrupted by signals all the time still works.
// Trainers embed gradcomm in processes that take signals (Python's handlers,
// profilers' timers, a launcher's SIGCHLD); a handler installed without
// SA_RESTART makes every blocking system call return EINTR, and a transport that
// read EINTR as failure or as "no data" would fail or hang the job. Here a thread
// pelts every rank thread (pthread_kill) and the whole process (kill: it lands in
// whichever thread has the signal unblocked: the store's, a rank's) with SIGUSR2
// every few tens of µs while the ranks meet through the store, run collectives
// that fill the socket buffers, and shut down together.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "socket_ranks.hpp"

namespace gradcomm::test {
namespace {

std::atomic<long> g_signals_handled{0};
void count_signal(int) {
  g_signals_handled.fetch_add(1, std::memory_order_relaxed);
}

// Installs the handler (no SA_RESTART), blocks the signal in the calling thread,
// and sends it until destroyed; rank threads unblock it and enlist.
class SignalStorm {
 public:
  SignalStorm() {
    struct sigaction sa {};
    sa.sa_handler = count_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR
    sigaction(SIGUSR2, &sa, &old_action_);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, &old_mask_);  // threads made from here on inherit it
    sender_ = std::thread([this] {
      while (!stop_.load()) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          for (pthread_t t : targets_) pthread_kill(t, SIGUSR2);
        }
        kill(getpid(), SIGUSR2);
        std::this_thread::sleep_for(std::chrono::microseconds(30));
      }
    });
  }
  ~SignalStorm() {
    stop_.store(true);
    sender_.join();
    // A signal still pending for this thread runs the counting handler here, before the old action returns.
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    sigaction(SIGUSR2, &old_action_, nullptr);
  }
  // Called by a rank thread: it takes the signal from now on, directed and process-wide.
  void enlist() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    std::lock_guard<std::mutex> lock(mutex_);
    targets_.push_back(pthread_self());
  }
  // Before the rank threads exit: a pthread_kill to a finished thread is undefined.
  void discharge() {
    std::lock_guard<std::mutex> lock(mutex_);
    targets_.clear();
  }

 private:
  struct sigaction old_action_ {};
  sigset_t old_mask_{};
  std::mutex mutex_;
  std::vector<pthread_t> targets_;
  std::atomic<bool> stop_{false};
  std::thread sender_;
};

TEST(SocketSignals, InterruptedSystemCallsNeitherFailNorHangTheJob) {
  const int n = 3;
  const int port = free_tcp_port();
  std::vector<gcommComm_t> comms(n, nullptr);
  const long before = g_signals_handled.load();
  {
    SignalStorm storm;
    std::atomic<int> finished{0};
    std::atomic<bool> discharged{false};
    auto errors = run_ranks(comms, [&](int r, gcommComm_t) -> std::string {
      storm.enlist();
      std::string error;
      gcommCommConfig_t c = socket_config(r, n, port, 60.0, "signals-test");
      gcommComm_t comm = nullptr;
      if (gcommCommInit(&c, &comm) != gcommSuccess) error = gcommGetLastError();
      // 3 MiB per rank overflows loopback socket buffers, so sends block and resume.
      for (size_t count : {size_t(1), size_t(4099), size_t(3) << 18}) {
        for (int iter = 0; iter < 20 && error.empty(); ++iter) {
          std::vector<float> data(count);
          for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((r + 1) * (i % 7 + 1) + iter);
          if (gcommAllReduce(comm, data.data(), data.data(), count, gcommFloat32, gcommSum, nullptr) !=
              gcommSuccess) {
            error = gcommGetLastError();
            break;
          }
          // Sum over ranks of (r + 1) * (i % 7 + 1) + iter: small integers, exact in float.
          for (size_t i = 0; i < count; ++i) {
            const float want = static_cast<float>(6 * (i % 7 + 1) + n * iter);
            if (data[i] != want) {
              error = "rank " + std::to_string(r) + ": element " + std::to_string(i) + " is " +
                      std::to_string(data[i]) + ", not " + std::to_string(want);
              break;
            }
          }
        }
      }
      if (comm != nullptr && gcommCommDestroy(comm) != gcommSuccess && error.empty())
        error = gcommGetLastError();
      // No thread leaves while the sender may still aim at it.
      if (finished.fetch_add(1) + 1 == n) {
        storm.discharge();
        discharged.store(true);
      }
      while (!discharged.load()) std::this_thread::yield();
      return error;
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  }
  // The storm really happened: otherwise this test proves nothing.
  EXPECT_GT(g_signals_handled.load() - before, 100);
}

}  // namespace
}  // namespace gradcomm::test
