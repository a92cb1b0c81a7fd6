#include "reducer/straggler_attribution.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

namespace gradcomm::reducer {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (upper + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
}

// The durations of a rank's phases before its gradients were ready; NaN where a
// mark was not given (without marks, everything since the origin is compute).
std::array<double, 3> phase_durations(const RankStep& r) {
  const double nan = std::nan("");
  const bool opt = r.optimizer_done_us >= 0, fwd = r.forward_us >= 0;
  const double opt_end = opt ? r.optimizer_done_us : 0;
  const double fwd_start = fwd ? std::max(r.forward_us, opt_end) : opt_end;
  return {opt ? opt_end : nan, fwd ? fwd_start - opt_end : nan, std::max(r.ready_us - fwd_start, 0.0)};
}

// Where rank s lost the time: among the phases up to `last` (0 optimizer, 1 data,
// 2 compute), the one whose duration exceeds the other ranks' median the most.
LatePhase late_phase(const RankStep* ranks, int n, int s, int last) {
  constexpr LatePhase kPhases[3] = {LatePhase::kOptimizer, LatePhase::kData, LatePhase::kCompute};
  const std::array<double, 3> mine = phase_durations(ranks[s]);
  LatePhase best = kPhases[last];
  double best_excess = -HUGE_VAL;
  for (int k = 0; k <= last; ++k) {
    if (std::isnan(mine[k])) continue;
    std::vector<double> others;
    for (int r = 0; r < n; ++r) {
      const double d = phase_durations(ranks[r])[k];
      if (r != s && !std::isnan(d)) others.push_back(d);
    }
    const double excess = mine[k] - median(others);
    if (excess > best_excess) {
      best_excess = excess;
      best = kPhases[k];
    }
  }
  return best;
}

// The rank that reached checkpoint `c` (0 optimizer's end, 1 forward's start, 2
// gradients ready) last, against the others' median; ranks without the mark sit
// out. A rank is measured at each: where the ranks meet before backward (the
// wrapper's buffer broadcast before forward, a framework's own collective), the
// others wait for the late one there, and only the checkpoints before that
// meeting still show who was late.
StepVerdict latest_at(const RankStep* ranks, int n, int c) {
  auto at = [&](const RankStep& r) {
    return c == 0 ? r.optimizer_done_us : c == 1 ? r.forward_us : r.ready_us;
  };
  int s = -1;
  for (int r = 0; r < n; ++r)
    if (at(ranks[r]) >= 0 && (s < 0 || at(ranks[r]) > at(ranks[s]))) s = r;
  std::vector<double> others;
  for (int r = 0; r < n; ++r)
    if (r != s && at(ranks[r]) >= 0) others.push_back(at(ranks[r]));
  if (s < 0 || others.empty()) return {};
  return {s, at(ranks[s]) - median(others), LatePhase::kNone};
}

}  // namespace

const char* late_phase_name(LatePhase p) noexcept {
  switch (p) {
    case LatePhase::kOptimizer:
      return "the optimizer step";
    case LatePhase::kData:
      return "data loading (before forward)";
    case LatePhase::kCompute:
      return "forward and backward";
    case LatePhase::kLink:
      return "its link (its gradients were ready on time)";
    case LatePhase::kNone:
      break;
  }
  return "nothing";
}

StepVerdict attribute_step(const RankStep* ranks, int n, const AttributionRules& rules) {
  if (n < 2) return {};
  std::vector<double> ends(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ends[static_cast<size_t>(r)] = ranks[r].end_us;
  const double threshold = std::max(rules.min_late_us, rules.step_fraction * median(ends));

  // Late before backward ended: the latest rank at the checkpoint where it was
  // latest, the phase among those up to that checkpoint.
  StepVerdict late;
  int checkpoint = -1;
  for (int c = 0; c < 3; ++c) {
    const StepVerdict v = latest_at(ranks, n, c);
    if (v.rank >= 0 && v.late_us > late.late_us) {
      late = v;
      checkpoint = c;
    }
  }
  if (late.rank >= 0 && late.late_us >= threshold) {
    late.phase = late_phase(ranks, n, late.rank, checkpoint);
    return late;
  }

  // A late link: the peer that most other ranks waited on longest, by how much
  // longer than on their other peers. Two ranks share their only link, and neither
  // has another peer to compare it with: no rank's link can be named.
  if (n < 3) return {};
  std::vector<int> votes(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const int p = static_cast<int>(ranks[r].top_peer);
    if (ranks[r].top_peer >= 0 && p < n && p != r) ++votes[static_cast<size_t>(p)];
  }
  StepVerdict best;
  for (int p = 0; p < n; ++p) {
    if (2 * votes[static_cast<size_t>(p)] <= n - 1) continue;  // not a majority of the others
    std::vector<double> excess;
    for (int r = 0; r < n; ++r)
      if (r != p && static_cast<int>(ranks[r].top_peer) == p && ranks[r].top_peer >= 0)
        excess.push_back(ranks[r].top_wait_us - ranks[r].typical_wait_us);
    const double e = median(excess);
    if (e >= threshold && e > best.late_us) best = {p, e, LatePhase::kLink};
  }
  return best;
}

WindowVerdict attribute_window(const std::vector<StepVerdict>& steps, const AttributionRules& rules) {
  WindowVerdict w;
  w.steps = static_cast<int>(steps.size());
  int most = -1, count = 0;
  for (const StepVerdict& v : steps) {
    if (v.rank < 0) continue;
    int c = 0;
    for (const StepVerdict& u : steps) c += u.rank == v.rank ? 1 : 0;
    if (c > count) {
      count = c;
      most = v.rank;
    }
  }
  if (most < 0 || count <= rules.window_share * w.steps) return w;
  w.rank = most;
  w.late_steps = count;
  std::vector<double> late;
  std::array<int, 5> phases{};
  for (const StepVerdict& v : steps)
    if (v.rank == most) {
      late.push_back(v.late_us);
      ++phases[static_cast<size_t>(v.phase)];
    }
  w.late_us = median(late);
  w.phase = static_cast<LatePhase>(std::max_element(phases.begin(), phases.end()) - phases.begin());
  return w;
}

NonFiniteVerdict attribute_nonfinite(const std::vector<RankStep>& all, int n, int steps) {
  NonFiniteVerdict v;
  std::map<std::pair<int, int>, std::pair<int, int>> sources;  // (rank, grad) -> (steps, alone)
  std::vector<std::pair<int, int>> order;                      // first seen first: ties go to it
  for (int k = 0; k < steps; ++k) {
    std::vector<std::pair<int, int>> flagged;
    for (int r = 0; r < n; ++r) {
      const double g = all[static_cast<size_t>(r * steps + k)].first_nonfinite;
      if (g >= 0) flagged.emplace_back(r, static_cast<int>(g));
    }
    if (flagged.empty()) continue;
    ++v.steps;
    for (const auto& src : flagged) {
      auto [it, fresh] = sources.try_emplace(src, 0, 0);
      if (fresh) order.push_back(src);
      ++it->second.first;
      if (flagged.size() == 1) ++it->second.second;
    }
  }
  for (const auto& src : order) {
    const auto& [count, alone] = sources[src];
    if (count > v.source_steps) {
      v.rank = src.first;
      v.grad = src.second;
      v.source_steps = count;
      v.alone_steps = alone;
    }
  }
  return v;
}

std::vector<double> clock_offsets_us(const std::vector<RankStep>& all, int n, int steps) {
  std::vector<double> offsets(static_cast<size_t>(n), 0.0);
  for (int r = 1; r < n; ++r) {
    std::vector<double> d;
    for (int k = 0; k < steps; ++k)
      d.push_back(all[static_cast<size_t>(r * steps + k)].origin_us - all[static_cast<size_t>(k)].origin_us);
    offsets[static_cast<size_t>(r)] = median(d);
  }
  return offsets;
}

}  // namespace gradcomm::reducer
