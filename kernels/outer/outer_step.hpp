// The outer step of outer synchronization (reducer/outer_sync.*; DiLoCo): the
// pseudo-gradient a rank contributes, and the outer optimizer's fused update,
// Nesterov SGD as DiLoCo uses. Each has a host twin and a CUDA kernel that give the
// same bits (outer_math.hpp: every product and sum rounded on its own), so every
// rank, given the same averaged pseudo-gradient, holds the same outer parameters.
#pragma once

#include <cstddef>

#include "kernels/ops.hpp"

namespace gradcomm::kernels::outer {

// The outer optimizer and how its result meets the parameters.
struct OuterRule {
  float lr = 0.7f;        // the outer learning rate
  float momentum = 0.9f;  // 0: plain SGD on the pseudo-gradients
  bool nesterov = true;
  // The weight kept of the parameters as they are when the update lands: 0 replaces
  // them with the outer parameters (DiLoCo); with a sync that overlapped inner
  // steps, a fraction of those steps' progress is kept (streaming DiLoCo's mix).
  float mix = 0.0f;
};

// Throws gcommInvalidArgument unless lr > 0, momentum in [0, 1) and mix in [0, 1),
// all finite, naming the field.
void check_rule(const OuterRule& rule);

// delta[i] = outer[i] - param[i] for i < n (f32).
void pseudo_gradient(const float* outer, const float* param, float* delta, size_t n, const Target& t);

// With delta the ranks' average, for i < n:
//   m = momentum * m + delta
//   step = nesterov ? delta + momentum * m : m
//   outer = outer - lr * step
//   param = mix == 0 ? outer : mix * param + (1 - mix) * outer
void outer_update(float* outer, float* m, const float* delta, float* param, size_t n, const OuterRule& rule,
                  const Target& t);

namespace cuda {  // outer_step_cuda.cu (a build with CUDA)
void pseudo_gradient(const float* outer, const float* param, float* delta, size_t n, gcommStream_t stream);
void outer_update(float* outer, float* m, const float* delta, float* param, size_t n, const OuterRule& rule,
                  gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::outer
