#include "reducer/bucket_autotune.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace gradcomm::reducer {

ProbeSizes probe_sizes(size_t total_wire_bytes) {
  const size_t large = std::min(total_wire_bytes, size_t{4} << 20);
  return ProbeSizes{std::min(size_t{256} << 10, large / 4), large};
}

LinkModel fit_link(double tiny_us, size_t small_bytes, double small_us, size_t large_bytes, double large_us) {
  require(large_bytes > small_bytes && tiny_us >= 0 && small_us >= 0 && large_us >= 0, "fit_link: sizes ",
          small_bytes, " and ", large_bytes, " with times ", tiny_us, ", ", small_us, " and ", large_us,
          " us");
  LinkModel link;
  link.alpha_us = tiny_us;
  link.us_per_byte = (large_us - small_us) / static_cast<double>(large_bytes - small_bytes);
  if (link.us_per_byte <= 0) link.us_per_byte = large_us / static_cast<double>(large_bytes);
  return link;
}

std::vector<size_t> candidate_caps(size_t configured) {
  std::vector<size_t> caps;
  for (size_t cap = size_t{256} << 10; cap <= size_t{64} << 20; cap *= 2) caps.push_back(cap);
  if (std::find(caps.begin(), caps.end(), configured) == caps.end()) caps.push_back(configured);
  std::sort(caps.begin(), caps.end());
  return caps;
}

double predict_finish_us(const BucketPlan& plan, const std::vector<double>& arrival_us,
                         const LinkModel& link) {
  double lane_free = 0;
  for (const Bucket& bucket : plan.buckets) {
    double ready = 0;
    for (const BucketEntry& e : bucket.entries) ready = std::max(ready, arrival_us.at(e.grad));
    lane_free = std::max(lane_free, ready) + link.predict_us(bucket.wire_bytes());
  }
  return lane_free;
}

size_t choose_cap(const std::vector<size_t>& caps, const std::vector<double>& predicted_us,
                  double first_arrival_us) {
  require(!caps.empty() && caps.size() == predicted_us.size(), "choose_cap: ", caps.size(), " caps and ",
          predicted_us.size(), " predictions");
  size_t chosen =
      static_cast<size_t>(std::min_element(predicted_us.begin(), predicted_us.end()) - predicted_us.begin());
  const double best = predicted_us[chosen];
  const double tie = best + std::max(0.0, best - first_arrival_us) * kTieFraction;
  for (size_t k = 0; k < caps.size(); ++k)
    if (predicted_us[k] <= tie && caps[k] > caps[chosen]) chosen = k;
  return chosen;
}

std::vector<float> pack_measurement(const LinkModel& link, const std::vector<double>& arrival_us,
                                    size_t num_grads) {
  std::vector<float> out(2 + num_grads, 0.f);
  const bool complete = arrival_us.size() == num_grads;
  out[0] = complete ? static_cast<float>(link.alpha_us) : -1.f;
  out[1] = static_cast<float>(link.us_per_byte);
  for (size_t i = 0; complete && i < num_grads; ++i) out[2 + i] = static_cast<float>(arrival_us[i]);
  return out;
}

CombinedMeasurement combine_measurements(const std::vector<float>& all, int ranks, size_t num_grads) {
  const size_t stride = 2 + num_grads;
  require(ranks > 0 && all.size() == stride * static_cast<size_t>(ranks),
          "combine_measurements: ", all.size(), " floats for ", ranks, " ranks of ", num_grads, " gradients");
  CombinedMeasurement c;
  c.arrival_us.assign(num_grads, 0);
  for (int r = 0; r < ranks; ++r) {
    const float* m = all.data() + stride * static_cast<size_t>(r);
    if (m[0] < 0) {
      c.incomplete_rank = r;
      return c;
    }
    c.link.alpha_us = std::max(c.link.alpha_us, static_cast<double>(m[0]));
    c.link.us_per_byte = std::max(c.link.us_per_byte, static_cast<double>(m[1]));
    for (size_t i = 0; i < num_grads; ++i)
      c.arrival_us[i] = std::max(c.arrival_us[i], static_cast<double>(m[2 + i]));
  }
  return c;
}

void ArrivalRecorder::begin_step(double origin_us) {
  current_.assign(num_grads_, -1);
  origin_us_ = origin_us;
  marked_ = 0;
}

void ArrivalRecorder::mark(size_t index, double now_us) {
  if (index >= current_.size() || current_[index] >= 0) return;
  current_[index] = std::max(0.0, now_us - origin_us_);
  ++marked_;
}

void ArrivalRecorder::end_step() {
  if (marked_ == num_grads_ && num_grads_ > 0) steps_.push_back(current_);
  current_.clear();
  marked_ = 0;
}

std::vector<double> ArrivalRecorder::median_arrival_us() const {
  std::vector<double> median(num_grads_, 0);
  std::vector<double> seen(steps_.size());
  for (size_t i = 0; i < num_grads_; ++i) {
    for (size_t s = 0; s < steps_.size(); ++s) seen[s] = steps_[s][i];
    if (seen.empty()) continue;
    std::nth_element(seen.begin(), seen.begin() + static_cast<long>(seen.size() / 2), seen.end());
    median[i] = seen[seen.size() / 2];
  }
  return median;
}

}  // namespace gradcomm::reducer
