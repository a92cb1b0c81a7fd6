// The gradient norm and clipping (gcommReducerClipGradNorm) of a synced step's
// result, as a component of the reducer: over every gradient, or in sharded mode
// over this rank's parts, the ranks' partial sums all-gathered and combined in
// rank order (a collective: every rank calls it and gets the same bits).
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "gradcomm/types.h"
#include "memory/caching_allocator.hpp"
#include "reducer/side_stream.hpp"
#include "reducer/step_scalars.hpp"

namespace gradcomm::reducer {

class GradNorm {
 public:
  GradNorm(comm::Communicator& comm, memory::CachingAllocator& allocator, SideStream& side,
           const StepScalars& scalars)
      : comm_(comm), allocator_(allocator), side_(side), scalars_(scalars) {}

  // `parts`: the gradient elements this rank's result covers; `across_ranks`: they
  // are a shard of the whole, whose norm the ranks combine. The norm is written to
  // scalars.grad_norm() after `stream`'s work, and later work on `stream` waits
  // for it; with max_norm > 0 every element is then multiplied by
  // max_norm / (norm + 1e-6) when that is below 1.
  const float* clip(const std::vector<gcommTensor_t>& parts, bool across_ranks, float max_norm,
                    gcommStream_t stream);

 private:
  comm::Communicator& comm_;
  memory::CachingAllocator& allocator_;
  SideStream& side_;
  const StepScalars& scalars_;
};

}  // namespace gradcomm::reducer
