// The reducer's device scalars, one small allocation with a field per name: what
// the step's kernels write (its Inf/NaN flag, the gradient norm) and read (1.0f),
// and, in sharded mode, one double per rank for the norm's partial sums; then a
// float per gradient for this rank's own non-finite gradients.
#pragma once

#include <cstddef>

#include "gradcomm/types.h"
#include "memory/caching_allocator.hpp"
#include "reducer/side_stream.hpp"

namespace gradcomm::reducer {

class StepScalars {
 public:
  // Allocated and set (1.0f in one(), zeros elsewhere) on the side stream; the
  // caller synchronizes it before the first step. `ranks`: slots of rank_squares().
  // `grads`: slots of own_nonfinite().
  StepScalars(memory::CachingAllocator& allocator, SideStream& side, gcommDevice_t device, size_t ranks,
              size_t grads);
  ~StepScalars();  // freed in the side stream's order
  StepScalars(const StepScalars&) = delete;
  StepScalars& operator=(const StepScalars&) = delete;

  // Found-inf of the last synced step (> 0: Inf/NaN seen), written on the
  // caller's stream at finalize: what gcommReducerFoundInf reads.
  float* last_found_inf() const { return &block_->last_found_inf; }
  // This step's found-inf, written by the epilogues on the side stream.
  float* step_found_inf() const { return &block_->step_found_inf; }
  const float* one() const { return &block_->one; }
  float* grad_norm() const { return &block_->grad_norm; }
  // Sharded mode: each rank's sum of squares of its shard (the norm's partial sums).
  double* rank_squares() const { return reinterpret_cast<double*>(block_ + 1); }
  // Per registered gradient: this rank's own packed value was Inf/NaN this step
  // (the pack sets it; the reducer zeroes it at begin).
  float* own_nonfinite() const { return reinterpret_cast<float*>(rank_squares() + ranks_); }
  size_t grads() const { return grads_; }

 private:
  struct Block {
    float last_found_inf;
    float one;
    float step_found_inf;
    float grad_norm;
  };
  static_assert(sizeof(Block) % alignof(double) == 0, "the doubles after the block stay aligned");

  memory::CachingAllocator& allocator_;
  SideStream& side_;
  const size_t ranks_, grads_;
  Block* block_;
};

}  // namespace gradcomm::reducer
