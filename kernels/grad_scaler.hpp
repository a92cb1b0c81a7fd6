// The grad scaler: dynamic loss-scale state in the scaler's device memory (or
// host memory for a host scaler), updated by kernels/scaler_math.hpp's rule
// without host synchronization.
#pragma once

#include "gradcomm/kernels.h"
#include "kernels/ops.hpp"
#include "kernels/scaler_math.hpp"

namespace gradcomm::kernels {

class GradScaler {
 public:
  GradScaler(gcommDevice_t device, const gcommGradScalerConfig_t& config);
  ~GradScaler();
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  gcommDevice_t device() const { return device_; }
  const ScalerParams& params() const { return params_; }
  // Lives on device(): pass its fields to kernels as device scalars.
  ScalerState* state() const { return state_; }

  void unscale(const gcommTensor_t* grads, size_t n, gcommStream_t stream);
  void update(gcommStream_t stream);
  // Synchronizes `stream`, then reads the state.
  ScalerState read(gcommStream_t stream) const;
  // Validates `s` against params(), then writes it (found_inf cleared, inv_scale
  // recomputed) ordered on `stream`, and synchronizes `stream`.
  void write(const gcommGradScalerState_t& s, gcommStream_t stream);

 private:
  gcommDevice_t device_;
  ScalerParams params_;
  ScalerState* state_ = nullptr;
};

// Throws gcommInvalidArgument naming the field if a value is out of range.
void validate_scaler_config(const gcommGradScalerConfig_t& config);

}  // namespace gradcomm::kernels
