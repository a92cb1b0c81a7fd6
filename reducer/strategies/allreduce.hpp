// The all-reduce strategy (plain and cast): each bucket's gradients are packed
// into its bucket buffer in one launch (cast to the bucket's wire dtype and divided
// by the world size first, so an f16 sum cannot overflow), all-reduced, and
// unpacked in one more (cast back, times 1/loss scale, Inf/NaN flagged). In
// sharded mode the bucket is reduce-scattered in place and only this rank's
// shard is unpacked (the parts of the gradients in it; the padding never). With
// views nothing is packed: the transport averages in place and the epilogue
// unscales and checks in place. Gradients another strategy takes are skipped.
#pragma once

#include <memory>
#include <vector>

#include "reducer/strategy.hpp"

namespace gradcomm::reducer {

class AllReduceStrategy final : public CompressionStrategy {
 public:
  gcommCompression_t kind() const noexcept override { return gcommCompressionNone; }
  const char* name() const noexcept override { return "none"; }
  // A step that failed part way leaves no deferred epilogue to the next one.
  void begin_step(const StrategyContext& /*ctx*/) override { deferred_.clear(); }
  void run_bucket(size_t b, bool complete, const StrategyContext& ctx) override;
  // With ctx.epilogue_at_finalize: the epilogues run_bucket left, fused.
  void end_step(const StrategyContext& ctx) override;

 private:
  void epilogue(size_t b, const StrategyContext& ctx);
  void fused_epilogue(const StrategyContext& ctx);
  std::vector<size_t> deferred_;  // this step's buckets whose epilogue waits for end_step
  // fused_epilogue's lists, kept across steps (no allocation once they have grown)
  std::vector<gcommTensor_t> fused_grads_;
  std::vector<size_t> fused_offsets_;
};

// The copying path's two halves, shared with strategies that send the packed
// bucket another way (quantized.*). pack_bucket: the bucket's marked gradients
// into `wire` (zeros first when the bucket is incomplete), divided by the world
// size when averaging, and times 1/loss scale when `unscale` (then the wire holds
// true gradient units). unpack_bucket: `src` (laid out like the bucket, in `dtype`)
// into the gradients, times 1/loss scale when `unscale`, Inf/NaN into the step flag.
void pack_bucket(size_t b, bool complete, void* wire, const StrategyContext& ctx, bool unscale = false);
void unpack_bucket(size_t b, const void* src, gcommDataType_t dtype, const StrategyContext& ctx,
                   bool unscale = true);

}  // namespace gradcomm::reducer
