// Small helpers shared by the plain (non-Google-Benchmark) programs in bench/:
// status checks that throw with the library's message, a reusable barrier for
// rank threads, and the median.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace gradcomm::bench {

inline void check(gcommStatus_t s, const char* what) {
  if (s != gcommSuccess)
    throw std::runtime_error(std::string(what) + ": " + gcommGetStatusString(s) + ": " + gcommGetLastError());
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Every rank thread waits until all have arrived; reusable.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen != gen_; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Runs body(rank) on one thread per communicator, then destroys the
// communicators; throws the first rank's error, naming the rank.
inline void on_rank_threads(std::vector<gcommComm_t>& comms, const std::function<void(int)>& body) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (gcommComm_t comm : comms) gcommCommDestroy(comm);
  for (int r = 0; r < n; ++r)
    if (!errors[r].empty()) throw std::runtime_error("rank " + std::to_string(r) + ": " + errors[r]);
}

}  // namespace gradcomm::bench
