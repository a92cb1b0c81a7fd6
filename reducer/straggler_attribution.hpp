// Which rank was late in a synced step, by how much and where, from every rank's
// own account of the step (pure functions: the ranks' accounts in, a verdict out;
// StragglerMonitor gathers the accounts, docs/observability.md explains the rules).
//
// Every rank measures its step from its own origin: the moment its previous
// synced step's collectives completed. Those complete together on every rank (a
// collective is where the ranks meet), so the origins are one moment seen on n
// clocks, and durations from them compare across ranks without synchronized
// clocks. A rank whose gradients were ready late made everyone wait: the phase
// in which it lost the time is the one whose duration exceeds the other ranks'
// most (optimizer: origin to the optimizer's end; data: to the forward's start;
// compute: to its last gradient), measured at each of those checkpoints (where
// the ranks meet before backward, only the checkpoints before the meeting show
// who was late). A rank on time everywhere whose bytes everyone waited for after
// backward (the transport's waits on each peer) has a slow link.
#pragma once

#include <cstdint>
#include <vector>

namespace gradcomm::reducer {

// One rank's account of one synced step; times in microseconds from its origin,
// -1 where a mark was not given. Nine doubles: the summary every rank sends.
struct RankStep {
  double origin_us = 0;           // the origin on this rank's steady clock (the trace's clock)
  double optimizer_done_us = -1;  // gcommStepMarkOptimizerDone, the first after the origin
  double forward_us = -1;         // gcommStepMarkForwardStart, the first after the origin
  double ready_us = 0;            // its last gradient was marked ready (backward ended)
  double end_us = 0;              // its finalize returned: the step's collectives completed
  double top_peer = -1;           // the peer it waited on longest after backward ended (-1: cannot tell)
  double top_wait_us = 0;         // how long
  double typical_wait_us = 0;     // the median of its waits on its other peers
  double first_nonfinite = -1;    // its first gradient whose own packed value was Inf/NaN (-1: none)
};
static_assert(sizeof(RankStep) == 9 * sizeof(double), "the summary is nine doubles");

// The values are gcommLatePhase_t's.
enum class LatePhase : int { kNone = 0, kOptimizer = 1, kData = 2, kCompute = 3, kLink = 4 };
const char* late_phase_name(LatePhase p) noexcept;  // "optimizer", "data loading", ...

struct AttributionRules {
  // A rank is late in a step by at least max(min_late_us, step_fraction x the
  // step's median length): below that, scheduling noise on a busy host.
  double min_late_us = 20000;
  double step_fraction = 0.1;
  // A window names the rank late on more than this share of its steps.
  double window_share = 0.5;
};

struct StepVerdict {
  int rank = -1;  // -1: nobody was late
  double late_us = 0;
  LatePhase phase = LatePhase::kNone;
};

// `ranks[r]` is rank r's account of the step; n ranks.
StepVerdict attribute_step(const RankStep* ranks, int n, const AttributionRules& rules);

struct WindowVerdict {
  int rank = -1;       // late on more than rules.window_share of the steps; -1: none was
  int late_steps = 0;  // the steps it was late on
  int steps = 0;
  double late_us = 0;                  // the median of its lateness over those steps
  LatePhase phase = LatePhase::kNone;  // where it lost the time most often
};

WindowVerdict attribute_window(const std::vector<StepVerdict>& steps, const AttributionRules& rules);

// Where the window's non-finite gradients came from: each rank flags its own
// gradients as it packs them, before any reduction, so a NaN from one rank's
// batch is told apart from an overflow on every rank.
struct NonFiniteVerdict {
  int steps = 0;         // steps of the window in which some rank's own gradient was Inf/NaN
  int rank = -1;         // the source on most of them: this rank ...
  int grad = -1;         // ... and its first non-finite gradient (registration index)
  int source_steps = 0;  // steps on which that (rank, gradient) was a source
  int alone_steps = 0;   // ... of which the only rank with a non-finite gradient
};

// `all`: every rank's accounts of `steps` steps, rank-major.
NonFiniteVerdict attribute_nonfinite(const std::vector<RankStep>& all, int n, int steps);

// Rank r's steady clock minus rank 0's, from the origins of `steps` steps
// (rank-major: all[r * steps + k]): the median of the differences. The origins
// are one moment up to the collective's exit skew, which bounds the error.
std::vector<double> clock_offsets_us(const std::vector<RankStep>& all, int n, int steps);

}  // namespace gradcomm::reducer
