// The element math of the outer step (outer_step.hpp), shared by the host twin and
// the CUDA kernel: products and sums rounded one at a time (no fused multiply-add
// on the device), so both give the same bits.
#pragma once

#include "kernels/outer/outer_step.hpp"
#include "kernels/quant/quant_math.hpp"

namespace gradcomm::kernels::outer {

GCOMM_HD float pseudo_gradient_of(float outer, float param) {
  return quant::add_rn(outer, -param);
}

// One element's update: m, outer and param are read and written.
GCOMM_HD void update_element(float& outer, float& m, float delta, float& param, const OuterRule& rule) {
  using quant::add_rn;
  using quant::mul_rn;
  m = add_rn(mul_rn(rule.momentum, m), delta);
  const float step = rule.nesterov ? add_rn(delta, mul_rn(rule.momentum, m)) : m;
  outer = add_rn(outer, -mul_rn(rule.lr, step));
  param = rule.mix == 0.0f ? outer : add_rn(mul_rn(rule.mix, param), mul_rn(add_rn(1.0f, -rule.mix), outer));
}

}  // namespace gradcomm::kernels::outer
