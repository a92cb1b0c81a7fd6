// Deadlines from timeouts in seconds, saturated: every timeout gradcomm takes
// (config fields, GRADCOMM_TIMEOUT_S, the transports' own) becomes a point on
// the steady clock here, so a huge value (1e30, +inf) means "wait practically
// forever" instead of overflowing the clock into a deadline in the past.
#pragma once

#include <algorithm>
#include <chrono>

namespace gradcomm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Longer timeouts are cut to this (about 3.2 years): far from the clock's limit.
constexpr double kMaxTimeoutSeconds = 1e8;

// `seconds` as a clock duration: NaN and negatives are 0, huge values saturate.
inline Clock::duration saturated_seconds(double seconds) {
  const double s = seconds > 0.0 ? std::min(seconds, kMaxTimeoutSeconds) : 0.0;
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

inline Deadline deadline_after(double seconds, Deadline from = Clock::now()) {
  return from + saturated_seconds(seconds);
}

}  // namespace gradcomm
