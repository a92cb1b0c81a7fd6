#include "reducer/strategies/allreduce.hpp"

#include <vector>

#include "common/dtype.hpp"
#include "kernels/ops.hpp"
#include "memory/device_bytes.hpp"

namespace gradcomm::reducer {

namespace {
// The bucket's gradients this strategy carries (not those another one takes), and
// their element offsets in the bucket; with marked_only, only those marked this step.
void bucket_grads(const Bucket& bucket, const StrategyContext& ctx, bool marked_only,
                  std::vector<gcommTensor_t>& grads, std::vector<size_t>& offsets,
                  std::vector<size_t>* indices = nullptr) {
  grads.reserve(bucket.entries.size());
  offsets.reserve(bucket.entries.size());
  for (const BucketEntry& e : bucket.entries) {
    if (ctx.outermost.takes(e.grad) || (marked_only && !ctx.marked[e.grad])) continue;
    grads.push_back(ctx.grads[e.grad]);
    offsets.push_back(e.offset);
    if (indices != nullptr) indices->push_back(e.grad);
  }
}

// The epilogue's kernel over `dst`: with views, unscaled in place (without a scaler
// only checked: there is nothing to multiply); otherwise unpacked from `src`, laid
// out per `offsets` in `dtype`. Inf/NaN go into the step flag either way.
void finish_grads(const void* src, gcommDataType_t dtype, const size_t* offsets, const gcommTensor_t* dst,
                  size_t n, const StrategyContext& ctx) {
  if (!ctx.views)
    kernels::unpack(src, dtype, offsets, dst, n, 1.0f, ctx.inv_scale, false, ctx.step_flag, ctx.target());
  else if (ctx.inv_scale != nullptr)
    kernels::unscale_and_check(dst, n, ctx.inv_scale, ctx.step_flag, ctx.target());
  else
    kernels::check_finite(dst, n, ctx.step_flag, ctx.target());
}

}  // namespace

void AllReduceStrategy::run_bucket(size_t b, bool complete, const StrategyContext& ctx) {
  const Bucket& bucket = ctx.plan.buckets[b];
  // Nothing on the wire (a bucket of PowerSGD's matrices only, or of empty
  // gradients): no collective, no epilogue. Every rank has the same plan.
  if (bucket.elements == 0) return;
  void* wire = ctx.bucket_data[b];
  if (!ctx.views) {
    pack_bucket(b, complete, wire, ctx);
  } else if (!complete) {
    for (const BucketEntry& e : bucket.entries) {
      const gcommTensor_t& g = ctx.grads[e.grad];
      if (!ctx.outermost.takes(e.grad) && !ctx.marked[e.grad])
        memory::zero_bytes(g.data, g.count * dtype_size(g.dtype), ctx.device, ctx.side.stream());
    }
  }
  // Views are not packed, so the transport averages (NCCL's ncclAvg divides before summing).
  const gcommRedOp_t op = ctx.views && ctx.average ? gcommAvg : gcommSum;
  if (ctx.sharding != nullptr) {
    auto span = ctx.span("reduce_scatter", SpanKind::kComm, b);
    ctx.sharding->reduce_scatter(bucket, wire, op);
  } else {
    auto span = ctx.span("all_reduce", SpanKind::kComm, b);
    ctx.comm.collective(comm::owned_buffers_call(comm::Collective::kAllReduce, wire, wire, bucket.elements,
                                                 bucket.wire_dtype, ctx.side.stream(), op));
  }
  if (ctx.epilogue_at_finalize)
    deferred_.push_back(b);
  else
    epilogue(b, ctx);
}

void AllReduceStrategy::end_step(const StrategyContext& ctx) {
  if (deferred_.empty()) return;
  if (ctx.sharding != nullptr) {
    for (size_t b : deferred_) epilogue(b, ctx);  // shard pieces: one launch each, as per bucket
  } else {
    fused_epilogue(ctx);
  }
  deferred_.clear();
}

// Every deferred bucket's gradients in one list. With views: unscaled (or checked)
// in place, one launch. Otherwise unpacked from the bucket buffer, whose buckets are
// one allocation (bucket_data[0] its start, each bucket's offset a multiple of 256
// bytes), so one launch per wire dtype serves them all.
void AllReduceStrategy::fused_epilogue(const StrategyContext& ctx) {
  TimedSpan span(ctx.timeline, "epilogue", SpanKind::kCompute, -1, ctx.side.stream());
  const char* base = static_cast<const char*>(ctx.bucket_data[0]);
  for (int d = 0; d < gcommNumDataTypes; ++d) {
    const auto dtype = static_cast<gcommDataType_t>(d);
    fused_grads_.clear();
    fused_offsets_.clear();
    for (size_t b : deferred_) {
      const Bucket& bucket = ctx.plan.buckets[b];
      if (!ctx.views && bucket.wire_dtype != dtype) continue;
      const size_t at = static_cast<size_t>(static_cast<const char*>(ctx.bucket_data[b]) - base) /
                        dtype_size(bucket.wire_dtype);
      for (const BucketEntry& e : bucket.entries) {
        if (ctx.outermost.takes(e.grad)) continue;
        fused_grads_.push_back(ctx.grads[e.grad]);
        fused_offsets_.push_back(at + e.offset);
      }
    }
    if (!fused_grads_.empty())
      finish_grads(base, dtype, fused_offsets_.data(), fused_grads_.data(), fused_grads_.size(), ctx);
    if (ctx.views) return;  // in place: every dtype in the one list
  }
}

// Right after the bucket's collective, so that it overlaps the later buckets'
// communication and finalize is left with the last bucket's only: unpack (cast
// back, times 1/loss scale) or, with views, unscale in place; Inf/NaN into the step flag.
void AllReduceStrategy::epilogue(size_t b, const StrategyContext& ctx) {
  const Bucket& bucket = ctx.plan.buckets[b];
  if (ctx.sharding == nullptr && !ctx.views) {
    unpack_bucket(b, ctx.bucket_data[b], bucket.wire_dtype, ctx);
    return;
  }
  std::vector<gcommTensor_t> dst;
  std::vector<size_t> offsets;
  if (ctx.sharding != nullptr) {
    ctx.sharding->parts_of(b, bucket, ctx.grads, dst, &offsets);  // this rank's shard only
  } else {
    for (const BucketEntry& e : bucket.entries)
      if (!ctx.outermost.takes(e.grad)) dst.push_back(ctx.grads[e.grad]);
  }
  if (dst.empty()) return;
  auto span = ctx.span("epilogue", SpanKind::kCompute, b);
  finish_grads(ctx.bucket_data[b], bucket.wire_dtype, offsets.data(), dst.data(), dst.size(), ctx);
}

void pack_bucket(size_t b, bool complete, void* wire, const StrategyContext& ctx, bool unscale) {
  const Bucket& bucket = ctx.plan.buckets[b];
  std::vector<gcommTensor_t> src;
  std::vector<size_t> offsets, indices;
  bucket_grads(bucket, ctx, /*marked_only=*/true, src, offsets, &indices);
  auto span = ctx.span("pack", SpanKind::kCompute, b);
  if (!complete) memory::zero_bytes(wire, bucket.wire_bytes(), ctx.device, ctx.side.stream());
  const float world = static_cast<float>(ctx.comm.size());
  // The pack reads this rank's own gradients: it flags the non-finite ones by index.
  kernels::pack(src.data(), src.size(), offsets.data(), wire, bucket.wire_dtype,
                ctx.average ? 1.0f / world : 1.0f, unscale ? ctx.inv_scale : nullptr, ctx.target(),
                ctx.own_nonfinite, indices.data());
}

void unpack_bucket(size_t b, const void* src, gcommDataType_t dtype, const StrategyContext& ctx,
                   bool unscale) {
  const Bucket& bucket = ctx.plan.buckets[b];
  std::vector<gcommTensor_t> dst;
  std::vector<size_t> offsets;
  bucket_grads(bucket, ctx, /*marked_only=*/false, dst, offsets);
  if (dst.empty()) return;
  auto span = ctx.span("epilogue", SpanKind::kCompute, b);
  kernels::unpack(src, dtype, offsets.data(), dst.data(), dst.size(), 1.0f, unscale ? ctx.inv_scale : nullptr,
                  false, ctx.step_flag, ctx.target());
}

}  // namespace gradcomm::reducer
