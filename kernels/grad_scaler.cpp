#include "kernels/grad_scaler.hpp"

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "common/device.hpp"

namespace gradcomm::kernels {

void validate_scaler_config(const gcommGradScalerConfig_t& c) {
  require(is_finite(c.init_scale) && c.init_scale > 0.0f, "init_scale must be positive and finite, not ",
          c.init_scale);
  require(is_finite(c.growth_factor) && c.growth_factor > 1.0f, "growth_factor must be > 1, not ",
          c.growth_factor);
  require(c.backoff_factor > 0.0f && c.backoff_factor < 1.0f, "backoff_factor must be in (0, 1), not ",
          c.backoff_factor);
  require(c.growth_interval >= 1, "growth_interval must be >= 1, not ", c.growth_interval);
  require(c.hysteresis >= 1, "hysteresis must be >= 1, not ", c.hysteresis);
  require(is_finite(c.min_scale) && c.min_scale >= 0.0f && c.min_scale <= c.init_scale,
          "min_scale must be in [0, init_scale], not ", c.min_scale);
}

GradScaler::GradScaler(gcommDevice_t device, const gcommGradScalerConfig_t& config)
    : device_(validate_device(device)) {
  validate_scaler_config(config);
  params_ = ScalerParams{config.growth_factor, config.backoff_factor, config.growth_interval,
                         config.hysteresis, config.min_scale};
  ScalerState initial{config.init_scale, 1.0f / config.init_scale, 0.0f, 0, config.hysteresis, 0};
  if (device_.kind == gcommDeviceCuda) {
    DeviceGuard guard(device_);
    void* p = nullptr;
    GCOMM_CUDA_CHECK(cudaMalloc(&p, sizeof(ScalerState)));
    state_ = static_cast<ScalerState*>(p);
    cudaError_t err = cudaMemcpy(state_, &initial, sizeof(initial), cudaMemcpyHostToDevice);
    // A pageable copy may return before its DMA lands, and the caller's stream may
    // be a non-blocking one, not ordered after it (gradcomm-perf read stale data so
    // on an H100): the state is in place before the scaler is handed out.
    if (err == cudaSuccess) err = cudaStreamSynchronize(nullptr);
    if (err != cudaSuccess) {
      GCOMM_CUDA_WARN(cudaFree(p));
      GCOMM_CUDA_CHECK(err);
    }
  } else {
    state_ = new ScalerState(initial);
  }
}

GradScaler::~GradScaler() {
  if (device_.kind == gcommDeviceCuda) {
    DeviceGuard guard(device_);
    GCOMM_CUDA_WARN(cudaFree(state_));
  } else {
    delete state_;
  }
}

// The caller's gradients are looked up; the scaler's own scalars are not.
void GradScaler::unscale(const gcommTensor_t* grads, size_t n, gcommStream_t stream) {
  Target target{device_, stream};
  target.scalars_known = true;
  unscale_and_check(grads, n, &state_->inv_scale, &state_->found_inf, target);
}

// The state is the scaler's own allocation: no driver query to find it.
void GradScaler::update(gcommStream_t stream) {
  update_scale(state_, params_, Target{device_, stream, true});
}

ScalerState GradScaler::read(gcommStream_t stream) const {
  if (device_.kind != gcommDeviceCuda) return *state_;
  DeviceGuard guard(device_);
  ScalerState s{};
  cudaStream_t cs = reinterpret_cast<cudaStream_t>(stream);
  GCOMM_CUDA_CHECK(cudaMemcpyAsync(&s, state_, sizeof(s), cudaMemcpyDeviceToHost, cs));
  GCOMM_CUDA_CHECK(cudaStreamSynchronize(cs));
  return s;
}

void GradScaler::write(const gcommGradScalerState_t& s, gcommStream_t stream) {
  require(is_finite(s.scale) && s.scale > 0.0f && s.scale >= params_.min_scale,
          "scale must be positive, finite and >= min_scale (", params_.min_scale, "), not ", s.scale);
  require(s.growth_tracker >= 0 && s.growth_tracker < params_.growth_interval,
          "growth_tracker must be in 0 .. ", params_.growth_interval - 1, " (growth_interval - 1), not ",
          s.growth_tracker);
  require(s.hysteresis_left >= 1 && s.hysteresis_left <= params_.hysteresis,
          "hysteresis_left must be in 1 .. ", params_.hysteresis, " (hysteresis), not ", s.hysteresis_left);
  require(s.skipped_last == 0 || s.skipped_last == 1, "skipped_last must be 0 or 1, not ", s.skipped_last);
  ScalerState next{s.scale, 1.0f / s.scale, 0.0f, s.growth_tracker, s.hysteresis_left, s.skipped_last};
  if (device_.kind != gcommDeviceCuda) {
    *state_ = next;
    return;
  }
  DeviceGuard guard(device_);
  cudaStream_t cs = reinterpret_cast<cudaStream_t>(stream);
  GCOMM_CUDA_CHECK(cudaMemcpyAsync(state_, &next, sizeof(next), cudaMemcpyHostToDevice, cs));
  GCOMM_CUDA_CHECK(cudaStreamSynchronize(cs));  // `next` lives on this stack frame
}

}  // namespace gradcomm::kernels
