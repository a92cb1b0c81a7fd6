// Straggler attribution: each rank's account of its synced steps (RankStep:
// host clock stamps, a few per step), gathered from every rank once per window
// of steps and judged alike everywhere (straggler_attribution.hpp): which rank
// was late on most of the window's steps, by how much and in which phase. The
// reducer stamps the step; the framework may mark the optimizer's end and the
// forward's start (gcommReducerNoteStepMark), which split "before the gradients
// were ready" into optimizer, data loading and compute. The transport says how
// long this rank waited on each peer (Transport::waited_on_ns), which names a
// slow link. Its cost: a clock read per stamp, and one small all-gather per
// window (docs/benchmarks.md).
//
// On a GPU the stamps are the host's: the time the host marked and finalized,
// which trails the device only where the host waits for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "comm/transport.hpp"
#include "reducer/straggler_attribution.hpp"

namespace gradcomm::reducer {

enum class StepMark { kOptimizerDone = 1, kForwardStart = 2 };  // gcommStepMark_t's values

struct StragglerReport {
  uint64_t windows = 0;                    // windows attributed so far
  uint64_t named_windows = 0;              // ... that named a late rank
  uint64_t first_step = 0, last_step = 0;  // the last window's synced steps (0: none yet)
  WindowVerdict window;                    // the last window's verdict
  StepVerdict last_step_verdict;           // its last step's alone
  double clock_offset_us = 0;              // this rank's steady clock minus rank 0's
  NonFiniteVerdict nonfinite;              // the window's non-finite gradients, by source
};

class StragglerMonitor {
 public:
  // window: synced steps per attribution (0: off).
  StragglerMonitor(int rank, int world, int window, AttributionRules rules);

  bool enabled() const noexcept { return window_ > 0 && world_ > 1; }
  int window() const noexcept { return window_; }
  double min_late_ms() const noexcept { return rules_.min_late_us / 1e3; }

  // Any time: the first of each kind after the last step's end counts.
  void note(StepMark mark) noexcept;
  // A synced step begins (the first one's origin, when no step ended before).
  void begin_step() noexcept;
  // The step's last gradient was marked ready; the first call of a step stamps,
  // and the transport's waits from then on are the step's link waits (waits
  // during backward follow uneven compute, not the link).
  void backward_done(const comm::Transport& transport) noexcept;
  // Every rank's settings become rank 0's (the reducer broadcasts them once, at
  // the first synced step: a window is an all-gather every rank must issue).
  void adopt(int window, double min_late_ms) noexcept;
  // The step's collectives completed (finalize, on the host after its lane).
  // Whether the window is complete: gather window() from every rank and attribute().
  // `first_nonfinite`: the first gradient whose own packed value was Inf/NaN on
  // this rank this step (-1: none).
  bool end_step(const comm::Transport& transport, int first_nonfinite = -1);
  // A step that failed: its stamps are dropped (the reducer fails for good after it).
  void abandon() noexcept { in_step_ = false; }

  // This rank's accounts of the window's steps, in order.
  const std::vector<RankStep>& accounts() const noexcept { return accounts_; }
  // Every rank's accounts (rank-major); `last_step` is the window's last synced
  // step. Starts the next window; rank 0 logs a verdict that changed.
  void attribute(const std::vector<RankStep>& all, uint64_t last_step);

  const StragglerReport& report() const noexcept { return report_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double now_us() noexcept;

  // Every wait counter of the transport, per peer, into `ns`; false where it cannot tell.
  bool read_waits(const comm::Transport& transport, std::vector<uint64_t>& ns) const noexcept;

  const int rank_, world_;
  int window_;
  AttributionRules rules_;
  double origin_us_ = -1;  // the last step's end (-1: none yet)
  double optimizer_done_us_ = -1, forward_us_ = -1, ready_us_ = -1;
  bool in_step_ = false;
  std::vector<uint64_t> waited_ns_;  // per peer, when this step's backward ended
  bool waits_known_ = false;         // ... read this step
  std::vector<RankStep> accounts_;
  StragglerReport report_;
  int logged_rank_ = -1;
  LatePhase logged_phase_ = LatePhase::kNone;
};

}  // namespace gradcomm::reducer
