// Reduction math of the host transports, shared by the host path and the CUDA
// kernels: ranks are combined in rank order (0, 1, ..., n-1) in float and
// rounded once, so every rank gets the same bits, run after run. NaN
// propagates through max and min (a gradient with NaN must not be hidden).
#pragma once

#include "gradcomm/types.h"
#include "kernels/element.hpp"

namespace gradcomm::kernels {

GCOMM_HD float combine(gcommRedOp_t op, float acc, float v) {
  switch (op) {
    case gcommMax:
      return (acc != acc || v != v) ? acc + v : (v > acc ? v : acc);
    case gcommMin:
      return (acc != acc || v != v) ? acc + v : (v < acc ? v : acc);
    default:
      return acc + v;  // sum, avg
  }
}

GCOMM_HD float finish(gcommRedOp_t op, float acc, int nranks) {
  return op == gcommAvg ? acc / static_cast<float>(nranks) : acc;
}

}  // namespace gradcomm::kernels
