// Sharded mode (gcommReducerSharded) as one component: which part of every bucket
// this rank owns (its shard's pieces, from the plan), the bucket's reduce-scatter
// into it, the step flag every rank agrees on, and the parameters' all-gather
// (sharded_params.hpp). The reducer holds one only in sharded mode; the
// all-reduce strategy and the gradient norm ask it where this rank's part lies.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/communicator.hpp"
#include "gradcomm/types.h"
#include "memory/caching_allocator.hpp"
#include "reducer/bucket_plan.hpp"
#include "reducer/sharded_params.hpp"
#include "reducer/side_stream.hpp"

namespace gradcomm::reducer {

class Sharding {
 public:
  Sharding(comm::Communicator& comm, memory::CachingAllocator& allocator, SideStream& side);

  size_t shards() const { return shards_; }
  // This rank's pieces of every bucket of `plan` (the reducer lays its buckets out).
  void lay_out(const BucketPlan& plan, const std::vector<GradSpec>& specs);
  const std::vector<ShardPiece>& pieces(size_t b) const { return pieces_[b]; }
  // This rank's shard of `bucket`, whose data starts at `data`.
  gcommTensor_t shard_of(const Bucket& bucket, void* data) const;
  // The parts of `tensors` (registration order: the gradients or the parameters)
  // in this rank's shard of bucket b, appended to `parts`; with `offsets`, each
  // part's element offset in the bucket.
  void parts_of(size_t b, const Bucket& bucket, const std::vector<gcommTensor_t>& tensors,
                std::vector<gcommTensor_t>& parts, std::vector<size_t>* offsets) const;
  // Every bucket's parts of `tensors`: what this rank's step result covers.
  std::vector<gcommTensor_t> owned_parts(const BucketPlan& plan,
                                         const std::vector<gcommTensor_t>& tensors) const;

  // On the side stream: bucket `bucket`'s sum (op) over the ranks into this rank's
  // shard, in place.
  void reduce_scatter(const Bucket& bucket, void* data, gcommRedOp_t op) const;
  // At finalize, on the side stream: every rank takes the largest step flag, so a
  // step with Inf/NaN in any rank's shard is skipped everywhere.
  void agree_on_found_inf(float* step_flag) const;

  ShardedParams& params() { return params_; }

 private:
  comm::Communicator& comm_;
  SideStream& side_;
  const size_t shards_, rank_;
  std::vector<std::vector<ShardPiece>> pieces_;  // per bucket (the plan does not change after lay_out)
  ShardedParams params_;
};

}  // namespace gradcomm::reducer
