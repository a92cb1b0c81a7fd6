#include "reducer/sharded_params.hpp"

#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "kernels/ops.hpp"
#include "memory/device_bytes.hpp"
#include "reducer/grad_addresses.hpp"
#include "reducer/sharding.hpp"

namespace gradcomm::reducer {

ShardedParams::ShardedParams(comm::Communicator& comm, memory::CachingAllocator& allocator, SideStream& side)
    : comm_(comm), allocator_(allocator), side_(side), device_(comm.device()) {}

ShardedParams::~ShardedParams() {
  try {
    if (staging_ != nullptr) allocator_.deallocate(staging_, side_.stream());
  } catch (const std::exception& e) {
    GCOMM_WARN("reducer destroy: the parameters' staging buffer: ", e.what());
  }
}

void ShardedParams::set(const gcommTensor_t* params, size_t n, const std::vector<gcommTensor_t>& grads,
                        const BucketPlan& plan) {
  require(params != nullptr, "argument 'params' must not be NULL");
  require(n == grads.size(), "num_params is ", n, " but the reducer has ", grads.size(), " gradients");
  std::vector<gcommTensor_t> checked(n);
  for (size_t i = 0; i < n; ++i) {
    const gcommTensor_t& p = params[i];
    require(p.count == grads[i].count && p.dtype == grads[i].dtype, "params[", i, "] has ", p.count, " ",
            dtype_name(p.dtype), " elements but gradient ", i, " has ", grads[i].count, " ",
            dtype_name(grads[i].dtype));
    require(p.data != nullptr || p.count == 0, "params[", i, "] has ", p.count,
            " elements but its data is NULL");
    checked_span(p.data, p.count, p.dtype, cat("params[", i, "]").c_str());
    if (p.count > 0)
      require_usable(pointer_info(p.data), device_, "params", static_cast<long long>(i),
                     "the communicator is on");
    checked[i] = p;
  }
  GradAddresses overlap_check(checked);  // no two parameters share memory
  // The staging buffer first: a failed allocation leaves everything as it was.
  if (params_.empty()) layout(plan);
  params_ = std::move(checked);
}

void ShardedParams::layout(const BucketPlan& plan) {
  std::vector<size_t> bytes;
  for (const Bucket& b : plan.buckets) bytes.push_back(b.elements * dtype_size(b.grad_dtype));
  size_t total = 0;
  std::vector<size_t> offsets = aligned_layout(bytes, &total, "the parameters");
  void* staging = total > 0 ? allocator_.allocate(total, side_.stream()) : nullptr;
  try {
    memory::zero_bytes(staging, total, device_, side_.stream());  // padding: initialized, never read back
  } catch (...) {
    if (staging != nullptr) allocator_.deallocate(staging, side_.stream());
    throw;
  }
  if (staging_ != nullptr) allocator_.deallocate(staging_, side_.stream());
  staging_ = staging;
  offset_ = std::move(offsets);
}

void ShardedParams::all_gather(size_t b, const BucketPlan& plan, const Sharding& sharding) {
  const Bucket& bucket = plan.buckets[b];
  const gcommDataType_t dtype = bucket.grad_dtype;
  void* staging = static_cast<char*>(staging_) + offset_[b];
  const size_t rank = static_cast<size_t>(comm_.rank());
  const size_t shard = bucket.shard_elements(sharding.shards());
  const kernels::Target target{device_, side_.stream(), true};
  std::vector<gcommTensor_t> parts;
  std::vector<size_t> offsets;
  sharding.parts_of(b, bucket, params_, parts, &offsets);
  kernels::pack(parts.data(), parts.size(), offsets.data(), staging, dtype, 1.0f, nullptr, target);
  void* my_block = static_cast<char*>(staging) + rank * shard * dtype_size(dtype);
  comm_.collective(comm::owned_buffers_call(comm::Collective::kAllGather, my_block, staging, shard, dtype,
                                            side_.stream()));
  std::vector<gcommTensor_t> all;
  offsets.clear();
  for (const BucketEntry& e : bucket.entries) {
    all.push_back(params_[e.grad]);
    offsets.push_back(e.offset);
  }
  kernels::unpack(staging, dtype, offsets.data(), all.data(), all.size(), 1.0f, nullptr, false, nullptr,
                  target);
}

}  // namespace gradcomm::reducer
