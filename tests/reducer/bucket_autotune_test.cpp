// The bucket autotune's model (reducer/bucket_autotune.hpp), alone: the link fit,
// the prediction of a plan's finish, the choice and its tie rule, the arrivals.
// The reducer's use of it (every rank the same cap, the rebuild, the refusals) is
// in reducer_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "common/error.hpp"
#include "reducer/bucket_autotune.hpp"

namespace gradcomm::reducer {
namespace {

TEST(BucketAutotune, TheFixedCostIsATinyCallsAndTheRateTheSlopeBetweenTwoSizes) {
  const LinkModel link = fit_link(120, 256 << 10, 300 + 0.01 * (256 << 10), 4 << 20, 300 + 0.01 * (4 << 20));
  EXPECT_EQ(link.alpha_us, 120) << "the 4-byte call, not the intercept (300)";
  EXPECT_NEAR(link.us_per_byte, 0.01, 1e-12);
  // A large call measured faster than a small one (noise on a fast link): no
  // negative rate, the large call's time spread over its bytes.
  const LinkModel noisy = fit_link(5, 1000, 50, 5000, 40);
  EXPECT_EQ(noisy.alpha_us, 5);
  EXPECT_NEAR(noisy.us_per_byte, 40.0 / 5000, 1e-12);
  EXPECT_THROW(fit_link(1, 5000, 1, 1000, 2), Error);
  EXPECT_THROW(fit_link(-1, 1000, 1, 5000, 2), Error);
}

TEST(BucketAutotune, ProbeSizesNeverExceedTheGradients) {
  EXPECT_EQ(probe_sizes(size_t{100} << 20).large_bytes, size_t{4} << 20);
  EXPECT_EQ(probe_sizes(size_t{100} << 20).small_bytes, size_t{256} << 10);
  EXPECT_EQ(probe_sizes(size_t{2} << 20).large_bytes, size_t{2} << 20);
  EXPECT_EQ(probe_sizes(size_t{512} << 10).small_bytes, size_t{128} << 10);
}

TEST(BucketAutotune, CandidatesArePowersOfTwoAndTheConfiguredCap) {
  const std::vector<size_t> caps = candidate_caps(size_t{25} << 20);
  EXPECT_EQ(caps.front(), size_t{256} << 10);
  EXPECT_EQ(caps.back(), size_t{64} << 20);
  EXPECT_EQ(caps.size(), 10u);  // 256 KiB .. 64 MiB is nine, and 25 MiB
  EXPECT_NE(std::find(caps.begin(), caps.end(), size_t{25} << 20), caps.end());
  EXPECT_EQ(candidate_caps(size_t{4} << 20).size(), 9u) << "4 MiB is a candidate already";
}

TEST(BucketAutotune, ABucketStartsWhenItsLastGradientArrivedAndTheLaneIsFree) {
  // Three f32 gradients of 1000 elements, one bucket each (cap 4000 bytes).
  std::vector<GradSpec> grads(3, GradSpec{1000, gcommFloat32});
  PlanOptions po;
  po.bucket_cap_bytes = 4000;
  po.first_bucket_bytes = 4000;
  const BucketPlan plan = plan_buckets(grads, po);  // launch order: grads 2, 1, 0
  ASSERT_EQ(plan.buckets.size(), 3u);
  const LinkModel link{10, 0.01};  // 10 + 40 us per bucket
  // Arrivals (registration order): grad 2 at 0, grad 1 at 100, grad 0 at 110.
  // Bucket of grad 2: 0..50; grad 1: 100..150; grad 0: waits for the lane, 150..200.
  EXPECT_DOUBLE_EQ(predict_finish_us(plan, {110, 100, 0}, link), 200);
  // One bucket for all three: starts at 110, takes 10 + 120.
  po.bucket_cap_bytes = po.first_bucket_bytes = 1 << 20;
  EXPECT_DOUBLE_EQ(predict_finish_us(plan_buckets(grads, po), {110, 100, 0}, link), 240);
}

// 48 MiB of gradients (1 MiB each) arriving evenly over a 45 ms backward.
std::vector<double> even_arrival(size_t n, double backward_us) {
  std::vector<double> a(n);
  for (size_t i = 0; i < n; ++i)
    a[n - 1 - i] = backward_us * static_cast<double>(i) / static_cast<double>(n - 1);
  return a;  // registration order: the last gradient arrives first
}

std::vector<double> predictions(const std::vector<size_t>& caps, const LinkModel& link) {
  const std::vector<GradSpec> grads(48, GradSpec{256 << 10, gcommFloat32});
  const std::vector<double> arrival = even_arrival(grads.size(), 45000);
  std::vector<double> out;
  for (size_t cap : caps) {
    PlanOptions po;
    po.bucket_cap_bytes = cap;
    po.first_bucket_bytes = std::min<size_t>(1 << 20, cap);
    out.push_back(predict_finish_us(plan_buckets(grads, po), arrival, link));
  }
  return out;
}

TEST(BucketAutotune, ASlowLinkGetsSmallerBucketsThanTheDefault) {
  const std::vector<size_t> caps = candidate_caps(size_t{25} << 20);
  // 1 Gbit-like: 119 MB/s, 400 us a call.
  const std::vector<double> slow = predictions(caps, LinkModel{400, 1.0 / 119});
  const size_t k = choose_cap(caps, slow);
  EXPECT_LT(caps[k], size_t{25} << 20);
  const size_t configured =
      static_cast<size_t>(std::find(caps.begin(), caps.end(), size_t{25} << 20) - caps.begin());
  EXPECT_LT(slow[k], slow[configured]);
}

TEST(BucketAutotune, AFixedCostAboveEverythingElseGetsOneBucket) {
  const std::vector<size_t> caps = candidate_caps(size_t{25} << 20);
  const std::vector<double> costly = predictions(caps, LinkModel{1e6, 1e-6});
  EXPECT_EQ(caps[choose_cap(caps, costly)], size_t{64} << 20);
}

TEST(BucketAutotune, AmongNearTiesTheLargestCapWins) {
  const std::vector<size_t> caps{1, 2, 4, 8};
  EXPECT_EQ(choose_cap(caps, {100, 100.3, 120, 100.7}), 1u) << "8 is 0.7% above the best: not a tie";
  EXPECT_EQ(choose_cap(caps, {100.4, 100, 120, 100.45}), 3u);
  EXPECT_EQ(choose_cap(caps, {50, 100, 120, 101}), 0u);
  // The band is a fraction of the span from the first arrival: 900 us of forward
  // and data loading before it do not widen it (0.5% of 100 us, not of 1000).
  EXPECT_EQ(choose_cap(caps, {1000, 1004, 1200, 1100}, 0), 1u);
  EXPECT_EQ(choose_cap(caps, {1000, 1004, 1200, 1100}, 900), 0u);
  EXPECT_THROW(choose_cap(caps, {1, 2}), Error);
}

TEST(BucketAutotune, ArrivalsAreMediansOfCompleteStepsFromTheLastStepsEnd) {
  ArrivalRecorder r(3);
  const double origin[3] = {900, 4990, 8950};
  const double steps[3][3] = {{1000, 1030, 1010}, {5000, 5090, 5005}, {9000, 9040, 9020}};
  for (int k = 0; k < 3; ++k) {
    r.begin_step(origin[k]);
    r.mark(0, steps[k][0]);
    r.mark(2, steps[k][2]);
    r.mark(1, steps[k][1]);
    r.mark(1, steps[k][1] + 500);  // a second mark of the same gradient changes nothing
    r.end_step();
  }
  r.begin_step(0);  // a step with gradient 1 never marked: dropped
  r.mark(0, 0);
  r.mark(2, 1e6);
  r.end_step();
  EXPECT_EQ(r.complete_steps(), 3);
  // Gradient 0: 100, 10, 50; gradient 1: 130, 100, 90; gradient 2: 110, 15, 70.
  EXPECT_EQ(r.median_arrival_us(), (std::vector<double>{50, 100, 70}));
}

TEST(BucketAutotune, CombinedMeasurementsTakeTheLatestArrivalAndTheSlowestLink) {
  const std::vector<float> rank0 = pack_measurement(LinkModel{100, 0.01}, {10, 500, 20}, 3);
  const std::vector<float> rank1 = pack_measurement(LinkModel{40, 0.02}, {30, 200, 25}, 3);
  std::vector<float> all(rank0);
  all.insert(all.end(), rank1.begin(), rank1.end());
  const CombinedMeasurement c = combine_measurements(all, 2, 3);
  EXPECT_EQ(c.incomplete_rank, -1);
  EXPECT_EQ(c.link.alpha_us, 100);
  EXPECT_NEAR(c.link.us_per_byte, 0.02, 1e-9);
  EXPECT_EQ(c.arrival_us, (std::vector<double>{30, 500, 25}));
  // A rank without a complete measured step (no arrivals) is named.
  const std::vector<float> none = pack_measurement(LinkModel{40, 0.02}, {}, 3);
  std::vector<float> with_none(rank0);
  with_none.insert(with_none.end(), none.begin(), none.end());
  EXPECT_EQ(combine_measurements(with_none, 2, 3).incomplete_rank, 1);
  EXPECT_THROW(combine_measurements(rank0, 2, 3), Error);
}

// A bucket waits for its slowest rank: the latest arrivals can make big buckets
// lose where one rank's own clock says they tie.
TEST(BucketAutotune, ASlowerRanksArrivalChangesTheChoice) {
  // Two 16 MB gradients (launch order: grad 1, then grad 0) on a link of 100 MB/s.
  const std::vector<GradSpec> grads(2, GradSpec{4 << 20, gcommFloat32});
  const LinkModel link{0, 0.01};
  const std::vector<size_t> caps{16 << 20, 32 << 20};
  auto predict = [&](const std::vector<double>& arrival) {
    std::vector<double> out;
    for (size_t cap : caps) {
      PlanOptions po;
      po.bucket_cap_bytes = cap;
      po.first_bucket_bytes = cap;
      out.push_back(predict_finish_us(plan_buckets(grads, po), arrival, link));
    }
    return out;
  };
  // Together at once: one bucket or two end alike (2 x 16 MB at 100 MB/s).
  EXPECT_EQ(caps[choose_cap(caps, predict({0, 0}))], size_t{32} << 20);
  // Gradient 0 arrives 100 ms later on the slower rank: two buckets send gradient 1
  // meanwhile.
  EXPECT_EQ(caps[choose_cap(caps, predict({100000, 0}))], size_t{16} << 20);
}

}  // namespace
}  // namespace gradcomm::reducer
