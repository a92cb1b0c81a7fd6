// The loss-scale rule step by step (PyTorch GradScaler's, plus hysteresis and a
// minimum scale), and the host grad scaler end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/grad_scaler.hpp"
#include "kernels/ops.hpp"
#include "kernels/scaler_math.hpp"

namespace gradcomm::kernels {
namespace {

ScalerState fresh(float scale, int hysteresis = 1) {
  return ScalerState{scale, 1.0f / scale, 0.0f, 0, hysteresis, 0};
}

void step(ScalerState& s, const ScalerParams& p, bool overflow) {
  s.found_inf = overflow ? 1.0f : 0.0f;
  update_scale(s, p);
}

TEST(ScaleRule, GrowsAfterIntervalCleanStepsAndBacksOffOnOverflow) {
  ScalerParams p{2.0f, 0.5f, 3, 1, 0.0f};
  ScalerState s = fresh(65536.0f);
  step(s, p, false);
  step(s, p, false);
  EXPECT_EQ(s.scale, 65536.0f);
  EXPECT_EQ(s.growth_tracker, 2);
  step(s, p, false);  // the interval boundary
  EXPECT_EQ(s.scale, 131072.0f);
  EXPECT_EQ(s.growth_tracker, 0);
  EXPECT_EQ(s.inv_scale, 1.0f / 131072.0f);
  step(s, p, false);
  step(s, p, false);
  step(s, p, true);  // overflow during growth: back off, tracker reset
  EXPECT_EQ(s.scale, 65536.0f);
  EXPECT_EQ(s.growth_tracker, 0);
  EXPECT_EQ(s.skipped_last, 1);
  EXPECT_EQ(s.found_inf, 0.0f) << "found-inf is cleared for the next step";
  step(s, p, false);
  EXPECT_EQ(s.skipped_last, 0);
  EXPECT_EQ(s.growth_tracker, 1);
}

TEST(ScaleRule, NeverGrowsToInf) {
  ScalerParams p{2.0f, 0.5f, 1, 1, 0.0f};
  ScalerState s = fresh(std::numeric_limits<float>::max() / 1.5f);
  step(s, p, false);
  EXPECT_TRUE(std::isfinite(s.scale));
  EXPECT_EQ(s.scale, std::numeric_limits<float>::max() / 1.5f);
  EXPECT_EQ(s.growth_tracker, 0);
}

TEST(ScaleRule, HysteresisToleratesOverflowsUntilItsBudgetIsSpent) {
  ScalerParams p{2.0f, 0.5f, 2, 3, 0.0f};
  ScalerState s = fresh(1024.0f, 3);
  step(s, p, true);
  EXPECT_EQ(s.scale, 1024.0f);
  EXPECT_EQ(s.hysteresis_left, 2);
  EXPECT_EQ(s.skipped_last, 1) << "the step is still skipped";
  step(s, p, true);
  EXPECT_EQ(s.scale, 1024.0f);
  step(s, p, true);  // budget spent: back off, and on every overflow after
  EXPECT_EQ(s.scale, 512.0f);
  step(s, p, true);
  EXPECT_EQ(s.scale, 256.0f);
  step(s, p, false);
  step(s, p, false);  // growth refills the budget
  EXPECT_EQ(s.scale, 512.0f);
  EXPECT_EQ(s.hysteresis_left, 3);
}

TEST(ScaleRule, NeverBacksOffBelowTheMinimum) {
  ScalerParams p{2.0f, 0.5f, 100, 1, 3.0f};
  ScalerState s = fresh(8.0f);
  step(s, p, true);
  EXPECT_EQ(s.scale, 4.0f);
  step(s, p, true);
  EXPECT_EQ(s.scale, 3.0f);
  step(s, p, true);
  EXPECT_EQ(s.scale, 3.0f);
}

TEST(HostGradScaler, UnscaleThenUpdate) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.init_scale = 8.0f;
  c.growth_interval = 2;
  GradScaler scaler(gcommHostDevice(), c);
  std::vector<float> g = {8.0f, -16.0f, 4.0f};
  gcommTensor_t t{g.data(), g.size(), gcommFloat32};
  scaler.unscale(&t, 1, nullptr);
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_EQ(g[1], -2.0f);
  scaler.update(nullptr);
  scaler.unscale(&t, 1, nullptr);
  scaler.update(nullptr);
  EXPECT_EQ(scaler.read(nullptr).scale, 16.0f);
  g[2] = std::numeric_limits<float>::infinity();
  scaler.unscale(&t, 1, nullptr);
  EXPECT_EQ(scaler.read(nullptr).found_inf, 1.0f);
  scaler.update(nullptr);
  ScalerState s = scaler.read(nullptr);
  EXPECT_EQ(s.scale, 8.0f);
  EXPECT_EQ(s.skipped_last, 1);
}

// The scaler's inv_scale and found_inf are its own allocation: unscale asks the
// driver only about the caller's gradients (~0.5 us a query on a GPU), two
// lookups fewer than the same kernel on caller-owned scalars.
TEST(HostGradScaler, UnscaleDoesNotLookUpItsOwnScalars) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  GradScaler scaler(gcommHostDevice(), c);
  std::vector<float> g = {8.0f, -16.0f, 4.0f};
  gcommTensor_t t{g.data(), g.size(), gcommFloat32};
  uint64_t before = pointer_lookups();
  scaler.unscale(&t, 1, nullptr);
  const uint64_t by_scaler = pointer_lookups() - before;

  float inv_scale = 0.5f, found_inf = 0.0f;
  before = pointer_lookups();
  unscale_and_check(&t, 1, &inv_scale, &found_inf, Target{gcommHostDevice(), nullptr});
  const uint64_t by_call = pointer_lookups() - before;
  EXPECT_EQ(by_scaler + 2, by_call);
  // Bad tensors are still refused.
  gcommTensor_t null_data{nullptr, 3, gcommFloat32};
  EXPECT_THROW(scaler.unscale(&null_data, 1, nullptr), Error);
}

TEST(HostGradScaler, ConfigIsValidated) {
  gcommGradScalerConfig_t c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.backoff_factor = 1.5f;
  EXPECT_THROW(GradScaler(gcommHostDevice(), c), Error);
  c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.growth_interval = 0;
  EXPECT_THROW(GradScaler(gcommHostDevice(), c), Error);
  c = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
  c.init_scale = std::numeric_limits<float>::infinity();
  EXPECT_THROW(GradScaler(gcommHostDevice(), c), Error);
}

}  // namespace
}  // namespace gradcomm::kernels
