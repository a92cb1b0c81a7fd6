// Buckets sized for the link: the bucket cap chosen from what the first steps
// measured, instead of a default picked for NVLink.
//
// Small buckets start the wire early in backward but pay a call's fixed cost
// each; large buckets pay it rarely but leave the link idle until they fill. On
// a slow link the first matters (the lab's 1 Gbit run: gc_f32 with 25 MB buckets
// started its big bucket 37 ms into a 45 ms backward; 4 MB buckets made the step
// 10-13% shorter). The right cap depends on the link and the model, so it is
// measured:
//  - arrival: over kMeasuredSteps synced steps (after the order rebuild), when
//    each gradient was marked ready, from the end of the previous synced step on
//    this rank (the median per gradient). The ranks leave a step's last collective
//    together, so their arrivals share a clock: a bucket is ready when the slowest
//    rank has it (the lab's 1 Gbit trace: the link idled ~30 ms until the slower
//    rank completed the 33.6 MB bucket, which a per-rank clock cannot see);
//  - the link: timed all-reduces on the communicator: a 4-byte one gives the fixed
//    cost per call, two larger sizes the cost per byte (LinkModel, fit_link);
//  - for each candidate cap, the plan it makes in the current order is played
//    against both (predict_finish_us): bucket b starts when its last gradient has
//    arrived and the bucket before it is done, and takes alpha + beta * bytes.
// Every rank's measurements are all-gathered and combined (combine_measurements:
// each gradient's latest arrival, the slowest link), so every rank predicts from
// the same bits, picks the same cap (choose_cap) and rebuilds the same plan at the
// same step. The model leaves out
// the lane's CPU share during backward beyond a call's latency: among candidates
// within kTieFraction of the best, the largest cap wins (fewer calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reducer/bucket_plan.hpp"

namespace gradcomm::reducer {

constexpr int kAutotuneMeasuredSteps = 3;
constexpr double kTieFraction = 0.005;
// Gradients below this many wire bytes fit the first bucket: nothing to tune.
constexpr size_t kAutotuneMinBytes = size_t{2} << 20;

// All-reduce time of `bytes`: alpha_us + us_per_byte * bytes.
struct LinkModel {
  double alpha_us = 0;
  double us_per_byte = 0;
  double predict_us(size_t bytes) const { return alpha_us + us_per_byte * static_cast<double>(bytes); }
};

// The two probe sizes for gradients of `total_wire_bytes` (the larger is at most
// the gradients' bytes, so a small model's probe costs no more than its step).
struct ProbeSizes {
  size_t small_bytes;
  size_t large_bytes;
};
ProbeSizes probe_sizes(size_t total_wire_bytes);

// From the fastest of each size's timed calls: the fixed cost is a 4-byte call's
// time (a fit's intercept drowns in the noise of a slow link: the lab's 1 Gbit run
// gave 0), the cost per byte the slope between the two sizes. A slope that is not
// positive (noise on a fast link) gives the large size's time over its bytes.
LinkModel fit_link(double tiny_us, size_t small_bytes, double small_us, size_t large_bytes, double large_us);

// The caps tried: powers of two from 256 KiB to 64 MiB, and `configured`.
std::vector<size_t> candidate_caps(size_t configured);

// When the last bucket of `plan` is done, with gradient i arriving at
// arrival_us[i] (registration order; any common origin).
double predict_finish_us(const BucketPlan& plan, const std::vector<double>& arrival_us,
                         const LinkModel& link);

// The index in `caps` of the cap to use, from the predictions (`predicted_us[k]`
// for caps[k]) on a clock where the first gradient arrives at `first_arrival_us`:
// the tie band is a fraction of the span the caps change (from the first arrival
// to the end), not of the forward and data loading before it.
size_t choose_cap(const std::vector<size_t>& caps, const std::vector<double>& predicted_us,
                  double first_arrival_us = 0);

// One rank's measurements as the floats the all-gather carries: the link's two
// figures, then each gradient's arrival. No complete measured step: a fixed cost
// of -1, which combine_measurements reports.
std::vector<float> pack_measurement(const LinkModel& link, const std::vector<double>& arrival_us,
                                    size_t num_grads);
struct CombinedMeasurement {
  LinkModel link;                  // the slowest rank's fixed cost and cost per byte
  std::vector<double> arrival_us;  // per gradient, the latest rank's arrival
  int incomplete_rank = -1;        // the first rank without a complete step (-1: none)
};
// `all`: every rank's pack_measurement, in rank order.
CombinedMeasurement combine_measurements(const std::vector<float>& all, int ranks, size_t num_grads);

// Collects each gradient's arrival over the measured steps.
class ArrivalRecorder {
 public:
  explicit ArrivalRecorder(size_t num_grads) : num_grads_(num_grads) {}
  // Marks count from `origin_us` (the end of the previous synced step).
  void begin_step(double origin_us);
  // Gradient `index` marked at `now_us` (the same monotonic clock).
  void mark(size_t index, double now_us);
  // A step whose every gradient was marked counts; one with gradients never
  // marked (unused) is dropped.
  void end_step();
  int complete_steps() const { return static_cast<int>(steps_.size()); }
  // Per gradient, the median of its arrival over the complete steps.
  std::vector<double> median_arrival_us() const;

 private:
  size_t num_grads_;
  std::vector<double> current_;
  double origin_us_ = 0;
  size_t marked_ = 0;
  std::vector<std::vector<double>> steps_;
};

}  // namespace gradcomm::reducer
