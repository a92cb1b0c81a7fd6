#include "reducer/strategies/block_wire.hpp"

#include <algorithm>
#include <cstring>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "kernels/ops.hpp"
#include "memory/device_bytes.hpp"
#include "reducer/strategies/allreduce.hpp"
#include "reducer/strategies/state_bytes.hpp"

namespace gradcomm::reducer {

namespace kq = kernels::quant;

namespace {

// Version 2 added the part (StatePart) after the version; version 1 is a whole state.
constexpr uint32_t kStateVersion = 2;

}  // namespace

BlockWireOptions block_wire_options(int block_size, int error_feedback, uint64_t start_iter) {
  const size_t block = block_size > 0 ? static_cast<size_t>(block_size) : 0;
  require(block >= kq::kMinBlock && block <= kq::kMaxBlock && (block & (block - 1)) == 0, "block_size ",
          block_size, " is not a power of two in ", kq::kMinBlock, "..", kq::kMaxBlock);
  require(error_feedback == 0 || error_feedback == 1, "error_feedback must be 0 or 1, not ", error_feedback);
  BlockWireOptions o;
  o.block = block;
  o.error_feedback = error_feedback == 1;
  o.start_iter = start_iter;
  return o;
}

void take_block_wire_options(OptionText& options, int& block_size, int& error_feedback,
                             uint64_t& start_iter) {
  options.take("block_size", block_size);
  options.take("error_feedback", error_feedback);
  options.take("start_iter", start_iter);
}

void refuse_unsupported_setup(const char* wire, const StrategySetup& setup) {
  if (setup.sharded)
    fail(gcommNotSupported, "the ", wire,
         " wire in sharded mode is not built (its reduce-scatter half would be); "
         "use gcommReducerAllReduce mode");
  if (setup.views)
    fail(gcommNotSupported, "the ", wire,
         " wire keeps each bucket's residual in its bucket buffer, which "
         "grad_as_bucket_view makes the gradients themselves; create the reducer without views");
}

BlockWire::BlockWire(const BlockWireKind& kind, const BlockWireOptions& options, int world, int rank,
                     memory::CachingAllocator& allocator, SideStream& side, gcommDevice_t device)
    : kind_(kind),
      options_(options),
      world_(world),
      rank_(rank),
      allocator_(allocator),
      side_(side),
      device_(device) {}

BlockWire::~BlockWire() {
  try {
    release();
  } catch (const std::exception& e) {
    GCOMM_WARN(kind_.name, " wire teardown: ", e.what());
  }
}

void* BlockWire::alloc(size_t bytes) {
  return bytes == 0 ? nullptr : allocator_.allocate(bytes, side_.stream());
}

void BlockWire::release() {
  side_.quiesce();  // teardown too: a failed step's error is not this call's
  for (void** b :
       {reinterpret_cast<void**>(&e_), reinterpret_cast<void**>(&e2_), reinterpret_cast<void**>(&r2_), &send_,
        &recv_, &gather_, reinterpret_cast<void**>(&decoded_)}) {
    if (*b != nullptr) allocator_.deallocate(*b, side_.stream());
    *b = nullptr;
  }
  e_total_ = e2_total_ = 0;
}

void BlockWire::set_layout(const BucketPlan& plan) {
  release();
  const size_t buckets = plan.buckets.size();
  quantized_.assign(buckets, 0);
  layouts_.assign(buckets, kq::Layout{});
  e_offset_.assign(buckets, 0);
  e2_offset_.assign(buckets, 0);
  size_t max_bytes = 0, max_n = 0;
  stats_.compressed_buckets = 0;
  stats_.f32_allreduce_bytes = 0;
  const uint64_t w = static_cast<uint64_t>(world_);
  for (size_t b = 0; b < buckets; ++b) {
    const Bucket& bucket = plan.buckets[b];
    if (bucket.wire_dtype != gcommFloat32 || bucket.elements == 0) continue;
    const kq::Layout l =
        kq::layout_for(bucket.elements, static_cast<size_t>(world_), options_.block, kind_.codec.code_bits);
    // Quantized only where it sends fewer bytes than f32: W chunks of at least a
    // block each against 4 bytes a value (a bucket smaller than W blocks may not).
    if (w * l.chunk_bytes() >= 4 * static_cast<uint64_t>(bucket.elements)) continue;
    quantized_[b] = 1;
    layouts_[b] = l;
    e_offset_[b] = e_total_;
    e2_offset_[b] = e2_total_;
    if (options_.error_feedback) {
      e_total_ += bucket.elements;
      e2_total_ += layouts_[b].chunk_elements();
    }
    max_bytes = std::max(max_bytes, layouts_[b].total_bytes());
    max_n = std::max(max_n, bucket.elements);
    ++stats_.compressed_buckets;
    stats_.f32_allreduce_bytes += 2 * (w - 1) * bucket.elements * sizeof(float) / w;
  }
  e_ = static_cast<float*>(alloc(e_total_ * sizeof(float)));
  e2_ = static_cast<float*>(alloc(e2_total_ * sizeof(float)));
  r2_ = static_cast<float*>(alloc(e2_total_ * sizeof(float)));
  send_ = alloc(max_bytes);
  recv_ = alloc(max_bytes);
  gather_ = alloc(max_bytes);
  decoded_ = static_cast<float*>(alloc(max_n * sizeof(float)));
  if (e_ != nullptr) memory::zero_bytes(e_, e_total_ * sizeof(float), device_, side_.stream());
  if (e2_ != nullptr) memory::zero_bytes(e2_, e2_total_ * sizeof(float), device_, side_.stream());
  stats_.error_feedback_bytes = (e_total_ + 2 * e2_total_) * sizeof(float);
}

void BlockWire::begin_step(const StrategyContext& ctx) {
  if (rest_ != nullptr) rest_->begin_step(ctx);
  pending_.clear();  // a step that failed half-way left its buckets here
  step_quantized_ = step_ >= options_.start_iter && stats_.compressed_buckets > 0;
  if (step_quantized_) stats_.bytes_last_step = 0;
}

void BlockWire::run_bucket(size_t b, bool complete, const StrategyContext& ctx) {
  if (!step_quantized_ || !quantized_[b]) {
    rest_->run_bucket(b, complete, ctx);
    return;
  }
  const kq::Layout& l = layouts_[b];
  float* wire = static_cast<float*>(ctx.bucket_data[b]);
  // Unscaled before quantizing: E and E2 hold true gradient units, so a loss scale
  // that changes between steps does not reweigh them.
  pack_bucket(b, complete, wire, ctx, /*unscale=*/true);
  {
    auto span = ctx.span("quantize", SpanKind::kCompute, b);
    // The residual overwrites the packed values: they are not needed past this point.
    kq::quantize(kind_.codec, wire, options_.error_feedback ? e_ + e_offset_[b] : nullptr, l, send_,
                 options_.error_feedback ? wire : nullptr, target());
  }
  const size_t words = l.chunk_bytes() / sizeof(float);  // chunks move as f32 words, bit for bit
  {
    auto span = ctx.span("all_to_all", SpanKind::kComm, b);
    ctx.comm.collective(comm::owned_buffers_call(comm::Collective::kAllToAll, send_, recv_, words,
                                                 gcommFloat32, side_.stream()));
  }
  char* mine = static_cast<char*>(gather_) + static_cast<size_t>(rank_) * l.chunk_bytes();
  {
    auto span = ctx.span("sum, requantize", SpanKind::kCompute, b);
    const bool ef = options_.error_feedback;
    kq::sum_requantize(kind_.codec, recv_, static_cast<size_t>(world_), l, ef ? e2_ + e2_offset_[b] : nullptr,
                       mine, ef ? r2_ + e2_offset_[b] : nullptr, target());
  }
  {
    auto span = ctx.span("all_gather", SpanKind::kComm, b);
    ctx.comm.collective(comm::owned_buffers_call(comm::Collective::kAllGather, mine, gather_, words,
                                                 gcommFloat32, side_.stream()));
  }
  {
    auto span = ctx.span("decode", SpanKind::kCompute, b);
    kq::dequantize(kind_.codec, gather_, l, decoded_, target());
  }
  unpack_bucket(b, decoded_, gcommFloat32, ctx, /*unscale=*/false);
  stats_.bytes_last_step += 2 * static_cast<uint64_t>(world_ - 1) * l.chunk_bytes();
  if (options_.error_feedback) pending_.push_back(b);
}

void BlockWire::end_step(const StrategyContext& ctx) {
  if (rest_ != nullptr) rest_->end_step(ctx);
  // E takes the residuals unless the step saw Inf/NaN anywhere (every bucket's
  // epilogue has written the step flag by now, identically on every rank).
  for (size_t b : pending_) {
    auto span = ctx.span("error feedback", SpanKind::kCompute, b);
    kernels::copy_unless_flagged(e_ + e_offset_[b], static_cast<const float*>(ctx.bucket_data[b]),
                                 layouts_[b].n, ctx.step_flag, target());
    kernels::copy_unless_flagged(e2_ + e2_offset_[b], r2_ + e2_offset_[b], layouts_[b].chunk_elements(),
                                 ctx.step_flag, target());
  }
  pending_.clear();
  if (step_quantized_) ++stats_.compressed_steps;
  ++step_;
}

std::vector<Counter> BlockWire::counters() const {
  return {{"compressed_steps", stats_.compressed_steps},
          {"compressed_buckets", stats_.compressed_buckets},
          {"bytes_last_step", stats_.bytes_last_step},
          {"f32_allreduce_bytes", stats_.f32_allreduce_bytes},
          {"error_feedback_bytes", stats_.error_feedback_bytes}};
}

std::vector<uint8_t> BlockWire::save(StatePart part) {
  // A shared state is the step counter alone: the residuals are this rank's.
  const bool residual = part == StatePart::kAll;
  std::vector<float> e(residual ? e_total_ + e2_total_ : 0);
  if (residual && e_total_ > 0)
    memory::copy_bytes(e.data(), e_, e_total_ * sizeof(float), device_, side_.stream(),
                       cudaMemcpyDeviceToHost);
  if (residual && e2_total_ > 0)
    memory::copy_bytes(e.data() + e_total_, e2_, e2_total_ * sizeof(float), device_, side_.stream(),
                       cudaMemcpyDeviceToHost);
  side_.synchronize();
  std::vector<uint8_t> out(kind_.state_magic, kind_.state_magic + sizeof kind_.state_magic);
  put(out, kStateVersion);
  put(out, static_cast<uint8_t>(part));
  put(out, static_cast<uint32_t>(options_.block));
  put(out, static_cast<uint32_t>(residual ? world_ : 0));  // a shared state is no rank's
  put(out, static_cast<uint32_t>(residual ? rank_ : 0));
  put(out, step_);
  put(out, static_cast<uint8_t>(options_.error_feedback ? 1 : 0));
  put(out, static_cast<uint64_t>(residual ? layouts_.size() : 0));
  for (size_t b = 0; residual && b < layouts_.size(); ++b)
    put(out, static_cast<uint64_t>(quantized_[b] ? layouts_[b].n : 0));
  const auto* eb = reinterpret_cast<const uint8_t*>(e.data());
  out.insert(out.end(), eb, eb + e.size() * sizeof(float));
  return out;
}

void BlockWire::load(const uint8_t* data, size_t bytes, StateOrigin origin) {
  const std::string state_name = cat(kind_.codec.name, " wire state");
  const char* kStateName = state_name.c_str();
  require(data != nullptr || bytes == 0, kStateName, ": data is NULL");
  const uint8_t* p = data;
  const uint8_t* end = data + bytes;
  require(
      bytes >= sizeof kind_.state_magic && std::memcmp(p, kind_.state_magic, sizeof kind_.state_magic) == 0,
      "not an ", kStateName, " (wrong magic)");
  p += sizeof kind_.state_magic;
  const auto version = take<uint32_t>(p, end, kStateName, "the version");
  require(version == 1 || version == kStateVersion, kStateName, " version ", version,
          " is not supported (this gradcomm reads 1 and ", kStateVersion, ")");
  const auto part = version == 1 ? uint8_t{0} : take<uint8_t>(p, end, kStateName, "the part");
  require(part <= 1, kStateName, ": part ", int{part}, " is neither 0 (all) nor 1 (shared)");
  const bool shared = part == static_cast<uint8_t>(StatePart::kShared);
  const auto block = take<uint32_t>(p, end, kStateName, "the block size");
  require(block == options_.block, "the state was saved with block_size ", block, ", this reducer uses ",
          options_.block);
  const auto world = take<uint32_t>(p, end, kStateName, "the world size");
  const auto rank = take<uint32_t>(p, end, kStateName, "the rank");
  // Another world's state is this process's from an earlier membership generation:
  // its own residual (per element of a bucket, whatever the chunking) is kept for the
  // buckets quantized in both worlds; the owner's residual of its shard is reset, the
  // shards being redrawn for the new world.
  const bool other_world = world != static_cast<uint32_t>(world_) || rank != static_cast<uint32_t>(rank_);
  require(shared || !other_world || origin == StateOrigin::kEarlierWorld, "the state was saved by rank ",
          rank, " of ", world, ", this is rank ", rank_, " of ", world_,
          " (each rank loads its own state; a fault-tolerant job's survivor carries its state across "
          "generations with gcommReducerCarryCompressionState)");
  const auto step = take<uint64_t>(p, end, kStateName, "the step");
  const auto ef = take<uint8_t>(p, end, kStateName, "the error feedback flag");
  require((ef == 1) == options_.error_feedback, "the state was saved with error_feedback ", int{ef},
          ", this reducer uses ", options_.error_feedback ? 1 : 0);
  const auto buckets = take<uint64_t>(p, end, kStateName, "the bucket count");
  require(buckets == (shared ? 0 : layouts_.size()), "the state has ", buckets,
          " buckets, this reducer's plan ", layouts_.size());
  // Where each saved bucket's residuals are in the state (SIZE_MAX: it has none).
  std::vector<size_t> saved_e(buckets, SIZE_MAX), saved_e2(buckets, SIZE_MAX);
  size_t saved_floats = 0, saved_e_total = 0;
  std::vector<uint64_t> saved_n(buckets);
  for (size_t b = 0; b < buckets; ++b) {
    saved_n[b] = take<uint64_t>(p, end, kStateName, "a bucket size");
    const size_t want = quantized_[b] ? layouts_[b].n : 0;
    require(other_world || saved_n[b] == want, "bucket ", b, " has ", saved_n[b],
            " quantized values in the state, ", want, " in this reducer's plan");
    if (saved_n[b] > 0 && ef) {
      saved_e[b] = saved_e_total;
      saved_e_total += saved_n[b];
    }
  }
  size_t saved_e2_total = 0;
  for (size_t b = 0; b < buckets; ++b)
    if (saved_e[b] != SIZE_MAX) {
      saved_e2[b] = saved_e_total + saved_e2_total;
      saved_e2_total +=
          kq::layout_for(saved_n[b], world, options_.block, kind_.codec.code_bits).chunk_elements();
    }
  saved_floats = saved_e_total + saved_e2_total;
  require(static_cast<size_t>(end - p) == saved_floats * sizeof(float), kStateName, ": ",
          static_cast<size_t>(end - p), " bytes of error feedback, expected ", saved_floats * sizeof(float));
  std::vector<float> saved(saved_floats);
  if (saved_floats > 0) std::memcpy(saved.data(), p, saved_floats * sizeof(float));
  // A shared state carried (kEarlierWorld): the job's step counter, this rank's
  // residuals kept.
  if (shared && origin == StateOrigin::kEarlierWorld) {
    step_ = step;
    return;
  }
  // Parsed: now this reducer's residuals, zero where the state has none for them.
  std::vector<float> e(e_total_ + e2_total_, 0.0f);
  for (size_t b = 0; b < buckets && options_.error_feedback; ++b) {
    if (!quantized_[b] || saved_e[b] == SIZE_MAX || saved_n[b] != layouts_[b].n) continue;
    std::copy_n(saved.data() + saved_e[b], layouts_[b].n, e.data() + e_offset_[b]);
    if (!other_world)
      std::copy_n(saved.data() + saved_e2[b], layouts_[b].chunk_elements(),
                  e.data() + e_total_ + e2_offset_[b]);
  }
  if (e_total_ > 0)
    memory::copy_bytes(e_, e.data(), e_total_ * sizeof(float), device_, side_.stream(),
                       cudaMemcpyHostToDevice);
  if (e2_total_ > 0)
    memory::copy_bytes(e2_, e.data() + e_total_, e2_total_ * sizeof(float), device_, side_.stream(),
                       cudaMemcpyHostToDevice);
  side_.synchronize();  // e is about to go
  step_ = step;
}

}  // namespace gradcomm::reducer
