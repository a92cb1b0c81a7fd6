// Sharded mode's parameters (gcommReducerSetParams, gcommReducerAllGatherParams):
// registered like the gradients, staged in a buffer laid out like the buckets but
// in the gradients' dtypes, and all-gathered bucket by bucket between steps, every
// rank contributing the elements of its shard's pieces. The reducer checks the
// step state and calls these on its side stream.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.hpp"
#include "gradcomm/types.h"
#include "memory/caching_allocator.hpp"
#include "reducer/bucket_plan.hpp"
#include "reducer/side_stream.hpp"

namespace gradcomm::reducer {

class Sharding;

class ShardedParams {
 public:
  ShardedParams(comm::Communicator& comm, memory::CachingAllocator& allocator, SideStream& side);
  ~ShardedParams();  // frees the staging buffer (after the side stream's work)
  ShardedParams(const ShardedParams&) = delete;
  ShardedParams& operator=(const ShardedParams&) = delete;

  bool registered() const { return !params_.empty(); }
  // params[i] must match grads[i] (count, dtype), live on the communicator's device
  // and not overlap one another (gcommInvalidArgument naming the first that does
  // not); the staging buffer is laid out for `plan` the first time. A failure
  // (out of memory included) changes nothing.
  void set(const gcommTensor_t* params, size_t n, const std::vector<gcommTensor_t>& grads,
           const BucketPlan& plan);
  // Bucket b's parameters all-gathered on the side stream: this rank's parts
  // (`sharding` says which) into its shard of the staging buffer, the all-gather
  // in place, every parameter of b copied back whole.
  void all_gather(size_t b, const BucketPlan& plan, const Sharding& sharding);

 private:
  void layout(const BucketPlan& plan);

  comm::Communicator& comm_;
  memory::CachingAllocator& allocator_;
  SideStream& side_;
  const gcommDevice_t device_;
  std::vector<gcommTensor_t> params_;  // registration order
  void* staging_ = nullptr;
  std::vector<size_t> offset_;  // per bucket: its place in staging_
};

}  // namespace gradcomm::reducer
