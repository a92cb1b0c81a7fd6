#include "reducer/sharding.hpp"

#include "common/dtype.hpp"

namespace gradcomm::reducer {

Sharding::Sharding(comm::Communicator& comm, memory::CachingAllocator& allocator, SideStream& side)
    : comm_(comm),
      side_(side),
      shards_(static_cast<size_t>(comm.size())),
      rank_(static_cast<size_t>(comm.rank())),
      params_(comm, allocator, side) {}

void Sharding::lay_out(const BucketPlan& plan, const std::vector<GradSpec>& specs) {
  std::vector<size_t> counts(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) counts[i] = specs[i].count;
  std::vector<std::vector<ShardPiece>> pieces;
  for (const Bucket& b : plan.buckets) pieces.push_back(shard_pieces(b, counts, shards_, rank_));
  pieces_ = std::move(pieces);
}

gcommTensor_t Sharding::shard_of(const Bucket& bucket, void* data) const {
  const size_t n = bucket.shard_elements(shards_);
  return gcommTensor_t{static_cast<char*>(data) + rank_ * n * dtype_size(bucket.wire_dtype), n,
                       bucket.wire_dtype};
}

void Sharding::parts_of(size_t b, const Bucket& bucket, const std::vector<gcommTensor_t>& tensors,
                        std::vector<gcommTensor_t>& parts, std::vector<size_t>* offsets) const {
  const size_t start = rank_ * bucket.shard_elements(shards_);
  for (const ShardPiece& p : pieces_[b]) {
    gcommTensor_t part = tensors[p.grad];
    part.data = static_cast<char*>(part.data) + p.grad_offset * dtype_size(part.dtype);
    part.count = p.count;
    parts.push_back(part);
    if (offsets != nullptr) offsets->push_back(start + p.shard_offset);
  }
}

std::vector<gcommTensor_t> Sharding::owned_parts(const BucketPlan& plan,
                                                 const std::vector<gcommTensor_t>& tensors) const {
  std::vector<gcommTensor_t> parts;
  for (size_t b = 0; b < plan.buckets.size(); ++b) parts_of(b, plan.buckets[b], tensors, parts, nullptr);
  return parts;
}

void Sharding::reduce_scatter(const Bucket& bucket, void* data, gcommRedOp_t op) const {
  const gcommTensor_t mine = shard_of(bucket, data);
  comm_.collective(comm::owned_buffers_call(comm::Collective::kReduceScatter, data, mine.data, mine.count,
                                            mine.dtype, side_.stream(), op));
}

void Sharding::agree_on_found_inf(float* step_flag) const {
  comm_.collective(comm::owned_buffers_call(comm::Collective::kAllReduce, step_flag, step_flag, 1,
                                            gcommFloat32, side_.stream(), gcommMax));
}

}  // namespace gradcomm::reducer
