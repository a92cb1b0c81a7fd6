// Runs one function per rank on its own thread (the local transport's contract)
// and gathers every rank's failures.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace gradcomm::test {

inline std::vector<gcommComm_t> make_local(int n, double timeout_s = 30.0) {
  std::vector<gcommComm_t> comms(n, nullptr);
  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  cfg.timeout_s = timeout_s;
  EXPECT_EQ(gcommCommInitLocal(n, gcommHostDevice(), &cfg, comms.data()), gcommSuccess)
      << gcommGetLastError();
  return comms;
}

inline void destroy(std::vector<gcommComm_t>& comms) {
  for (gcommComm_t c : comms) EXPECT_EQ(gcommCommDestroy(c), gcommSuccess) << gcommGetLastError();
  comms.clear();
}

// body(rank, comm) on one thread per rank; returns the per-rank error strings ("" = ok).
inline std::vector<std::string> run_ranks(std::vector<gcommComm_t>& comms,
                                          const std::function<std::string(int, gcommComm_t)>& body) {
  std::vector<std::string> errors(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] { errors[r] = body(static_cast<int>(r), comms[r]); });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace gradcomm::test
