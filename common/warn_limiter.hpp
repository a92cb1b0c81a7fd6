// Warnings about a stream of like events (connections that are not the job's: a
// port scanner, a client of another job retrying): the first `burst` in each
// `window` are said one line each, the rest are counted and said as one line when
// the window ends (the owner asks due() and calls summarize()) or the limiter
// goes, so that a round of them cannot fill the log.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/log.hpp"

namespace gradcomm {

class WarnLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // `prefix` starts every line ("store at host:port: "); `held` names what the
  // summary counts ("connections dropped or refused").
  WarnLimiter(std::string prefix, std::string held, int burst = 5,
              std::chrono::seconds window = std::chrono::seconds(10))
      : prefix_(std::move(prefix)), held_what_(std::move(held)), burst_(burst), window_(window) {}
  ~WarnLimiter() {
    try {
      summarize();
    } catch (...) {  // a log line could not be made: nothing to do about it here
    }
  }
  WarnLimiter(const WarnLimiter&) = delete;
  WarnLimiter& operator=(const WarnLimiter&) = delete;

  void warn(Clock::time_point now, const std::string& what) {
    if (now >= window_end_) {
      summarize();
      window_end_ = now + window_;
      said_ = 0;
    }
    if (said_ < burst_) {
      ++said_;
      GCOMM_WARN(prefix_, what);
      return;
    }
    ++held_;
    last_ = what;
  }
  // When the held lines are due (time_point::max() when none are held).
  Clock::time_point due() const { return held_ > 0 ? window_end_ : Clock::time_point::max(); }
  void summarize() {
    if (held_ == 0) return;
    GCOMM_WARN(prefix_, held_, " more ", held_what_, " in ", window_.count(),
               " s, not shown one by one (the last: ", last_, ")");
    held_ = 0;
  }

 private:
  const std::string prefix_, held_what_;
  const int burst_;
  const std::chrono::seconds window_;
  Clock::time_point window_end_ = Clock::time_point::min();
  int said_ = 0;
  uint64_t held_ = 0;
  std::string last_;
};

}  // namespace gradcomm
