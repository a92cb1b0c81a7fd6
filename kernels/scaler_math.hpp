// The dynamic loss-scale rule, one function for the device kernel and the host
// twin. It is PyTorch GradScaler's rule (growth after `interval` clean steps,
// backoff on overflow, growth tracker reset on overflow, never growing to Inf),
// plus DeepSpeed-style hysteresis (tolerate hysteresis-1 overflows before backing
// off; the budget refills after a growth) and a minimum scale.
#pragma once

#include <cstdint>

#include "kernels/element.hpp"

namespace gradcomm::kernels {

// Lives in device memory for a CUDA scaler (16 bytes, one allocation).
struct ScalerState {
  float scale;
  float inv_scale;  // 1/scale, what unscale multiplies by
  float found_inf;  // > 0 when the current step saw Inf/NaN
  int32_t growth_tracker;
  int32_t hysteresis_left;
  int32_t skipped_last;  // 1 if the last update saw an overflow (the step must be skipped)
};

struct ScalerParams {
  float growth_factor;
  float backoff_factor;
  int32_t growth_interval;
  int32_t hysteresis;  // 1 = back off on every overflow (PyTorch)
  float min_scale;
};

GCOMM_HD void update_scale(ScalerState& s, const ScalerParams& p) {
  if (s.found_inf > 0.0f) {
    s.skipped_last = 1;
    s.growth_tracker = 0;
    if (s.hysteresis_left > 1) {
      --s.hysteresis_left;
    } else {
      float backed = s.scale * p.backoff_factor;
      s.scale = backed < p.min_scale ? p.min_scale : backed;
    }
  } else {
    s.skipped_last = 0;
    int32_t successful = s.growth_tracker + 1;
    if (successful >= p.growth_interval) {
      float grown = s.scale * p.growth_factor;
      if (is_finite(grown)) s.scale = grown;
      s.growth_tracker = 0;
      s.hysteresis_left = p.hysteresis;
    } else {
      s.growth_tracker = successful;
    }
  }
  s.inv_scale = 1.0f / s.scale;
  s.found_inf = 0.0f;
}

}  // namespace gradcomm::kernels
