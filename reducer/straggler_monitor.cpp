#include "reducer/straggler_monitor.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/log.hpp"

namespace gradcomm::reducer {

StragglerMonitor::StragglerMonitor(int rank, int world, int window, AttributionRules rules)
    : rank_(rank), world_(world), window_(window), rules_(rules), waited_ns_(static_cast<size_t>(world), 0) {
  accounts_.reserve(static_cast<size_t>(std::max(window, 0)));
}

double StragglerMonitor::now_us() noexcept {
  return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}

void StragglerMonitor::note(StepMark mark) noexcept {
  if (!enabled()) return;
  double& slot = mark == StepMark::kOptimizerDone ? optimizer_done_us_ : forward_us_;
  if (slot < 0) slot = now_us();
}

void StragglerMonitor::begin_step() noexcept {
  if (!enabled()) return;
  if (origin_us_ < 0) origin_us_ = now_us();
  ready_us_ = -1;
  in_step_ = true;
}

void StragglerMonitor::backward_done(const comm::Transport& transport) noexcept {
  if (!in_step_ || ready_us_ >= 0) return;
  ready_us_ = now_us();
  waits_known_ = read_waits(transport, waited_ns_);
}

bool StragglerMonitor::read_waits(const comm::Transport& transport,
                                  std::vector<uint64_t>& ns) const noexcept {
  for (int q = 0; q < world_; ++q)
    if (q != rank_ && !transport.waited_on_ns(q, ns[static_cast<size_t>(q)])) return false;
  return true;
}

void StragglerMonitor::adopt(int window, double min_late_ms) noexcept {
  window_ = window;
  rules_.min_late_us = min_late_ms * 1e3;
  accounts_.clear();
  in_step_ = false;
  origin_us_ = now_us();  // the step's collectives have completed
  optimizer_done_us_ = forward_us_ = -1;
}

bool StragglerMonitor::end_step(const comm::Transport& transport, int first_nonfinite) {
  if (!in_step_) return false;
  in_step_ = false;
  const double end = now_us();
  RankStep a;
  a.origin_us = origin_us_;
  auto since_origin = [&](double t) { return t >= origin_us_ ? t - origin_us_ : -1.0; };
  a.optimizer_done_us = since_origin(optimizer_done_us_);
  a.forward_us = since_origin(forward_us_);
  a.ready_us = since_origin(ready_us_ >= 0 ? ready_us_ : end);
  a.end_us = end - origin_us_;
  a.first_nonfinite = first_nonfinite;
  // The step's waits on each peer since its backward ended.
  std::vector<uint64_t> now_ns(static_cast<size_t>(world_), 0);
  if (waits_known_ && world_ > 1 && read_waits(transport, now_ns)) {
    std::vector<std::pair<double, int>> waits;  // (us, peer)
    for (int q = 0; q < world_; ++q)
      if (q != rank_)
        waits.emplace_back(
            static_cast<double>(now_ns[static_cast<size_t>(q)] - waited_ns_[static_cast<size_t>(q)]) / 1e3,
            q);
    // Longest last; of equal waits, the lowest peer last (the one named).
    std::sort(waits.begin(), waits.end(), [](const auto& x, const auto& y) {
      return x.first < y.first || (x.first == y.first && x.second > y.second);
    });
    a.top_peer = waits.back().second;
    a.top_wait_us = waits.back().first;
    waits.pop_back();
    a.typical_wait_us = waits.empty() ? 0 : waits[waits.size() / 2].first;
  }
  waits_known_ = false;
  accounts_.push_back(a);
  origin_us_ = end;
  optimizer_done_us_ = forward_us_ = -1;
  return static_cast<int>(accounts_.size()) >= window_;
}

void StragglerMonitor::attribute(const std::vector<RankStep>& all, uint64_t last_step) {
  const int steps = static_cast<int>(accounts_.size());
  std::vector<StepVerdict> verdicts;
  std::vector<RankStep> step(static_cast<size_t>(world_));
  for (int k = 0; k < steps; ++k) {
    for (int r = 0; r < world_; ++r) step[static_cast<size_t>(r)] = all[static_cast<size_t>(r * steps + k)];
    verdicts.push_back(attribute_step(step.data(), world_, rules_));
  }
  report_.window = attribute_window(verdicts, rules_);
  report_.last_step_verdict = verdicts.empty() ? StepVerdict{} : verdicts.back();
  report_.first_step = last_step + 1 - static_cast<uint64_t>(steps);
  report_.last_step = last_step;
  ++report_.windows;
  if (report_.window.rank >= 0) ++report_.named_windows;
  report_.clock_offset_us = clock_offsets_us(all, world_, steps)[static_cast<size_t>(rank_)];
  report_.nonfinite = attribute_nonfinite(all, world_, steps);
  accounts_.clear();

  const NonFiniteVerdict& nf = report_.nonfinite;
  if (rank_ == 0 && nf.source_steps >= 2)  // once may be an overflow; again is a source
    GCOMM_WARN("non-finite gradients: rank ", nf.rank, "'s gradient ", nf.grad,
               " was Inf/NaN before the reduction on ", nf.source_steps, " of synced steps ",
               report_.first_step, "-", report_.last_step, " (the only rank on ", nf.alone_steps,
               " of them); the reduced gradients of those steps were non-finite on every rank "
               "(gcommReducerGetNonFiniteReport, docs/observability.md)");

  const WindowVerdict& w = report_.window;
  if (rank_ == 0 && (w.rank != logged_rank_ || (w.rank >= 0 && w.phase != logged_phase_))) {
    if (w.rank >= 0)
      GCOMM_WARN("straggler: rank ", w.rank, " was late on ", w.late_steps, " of synced steps ",
                 report_.first_step, "-", report_.last_step, ", by ", std::lround(w.late_us / 1e3),
                 " ms (median), in ", late_phase_name(w.phase),
                 "; every rank waited for it (gcommReducerGetStragglerReport, docs/observability.md)");
    else
      GCOMM_WARN("straggler: no rank was late on most of synced steps ", report_.first_step, "-",
                 report_.last_step, " (rank ", logged_rank_, " was before)");
    logged_rank_ = w.rank;
    logged_phase_ = w.phase;
  }
}

}  // namespace gradcomm::reducer
