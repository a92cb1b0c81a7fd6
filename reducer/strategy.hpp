// The compression seam: how one bucket's gradients cross the wire. The reducer
// (reducer.hpp) keeps the step state machine and the bucket buffer; a strategy is
// handed each bucket, in plan order, on the side stream, and communicates it and
// runs its epilogue. A strategy owns its options, statistics and saved state; the
// reducer knows none of them. The all-reduce strategy (strategies/allreduce.*) is
// every reducer's first; the others are listed in the compression table
// (compressions.cpp: one line each) and wrap it for what they do not compress.
// A strategy never allocates in a step (its state is made at enable/set_layout).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "gradcomm/reducer.h"
#include "gradcomm/types.h"
#include "kernels/ops.hpp"
#include "reducer/bucket_plan.hpp"
#include "reducer/sharding.hpp"
#include "reducer/side_stream.hpp"
#include "reducer/step_timeline.hpp"

namespace gradcomm::reducer {

class CompressionStrategy;

// Which part of a strategy's state is saved: all of this rank's, or only what every
// rank holds alike (the step counter, PowerSGD's Q; no residual), which is the same
// bytes on every rank and what a newcomer to a fault-tolerant job receives.
enum class StatePart : uint8_t { kAll = 0, kShared = 1 };
// Whose state is loaded: this rank's (refused unless saved by the same rank of the
// same world), or this process's from its reducer of an earlier membership
// generation (another world size or rank: what depends on the world is reset).
enum class StateOrigin { kThisRank, kEarlierWorld };

// What a strategy sees of the reducer during a call (valid for that call only).
struct StrategyContext {
  comm::Communicator& comm;
  SideStream& side;
  gcommDevice_t device;
  const BucketPlan& plan;
  const std::vector<gcommTensor_t>& grads;  // registration order, current addresses
  const std::vector<uint8_t>& marked;       // this step: marked ready (unmarked ones contribute zero)
  void* const* bucket_data;                 // per bucket: its place in the bucket buffer
  bool average;                             // divide the sum by the world size
  bool views;                               // grad_as_bucket_view: the gradients live in the buckets
  const Sharding* sharding;                 // sharded mode: this rank reduces only its shard of each
                                            // bucket (NULL: all-reduce mode)
  bool epilogue_at_finalize;  // GRADCOMM_REDUCER_EPILOGUE=finalize: the plain buckets' epilogues at
                              // end_step, fused (else each right after its bucket's collective)
  const float* inv_scale;     // device 1/loss scale, or NULL (no scaler)
  float* step_flag;           // device: this step's found-inf (> 0: Inf/NaN seen)
  // device, per registered gradient (or NULL): set when this rank's own packed
  // gradient is Inf/NaN, before any reduction (the first non-finite gradient named)
  float* own_nonfinite;
  const float* one;                      // device 1.0f
  const CompressionStrategy& outermost;  // asked takes(): the gradients another strategy carries
  StepTimeline& timeline;                // spans of this step's work (TimedSpan), when it is measured

  // The side stream, on the reducer's device; locations known (the reducer's
  // buffers and gradients checked at registration).
  kernels::Target target() const { return kernels::Target{device, side.stream(), true}; }
  // A span of this bucket's work on the side stream (`kind`: compute or communication).
  TimedSpan span(const char* name, SpanKind kind, size_t bucket) const {
    return TimedSpan(timeline, name, kind, static_cast<int>(bucket), side.stream());
  }
};

// One statistic: the C stats struct of a kind is its header followed by these,
// each a uint64_t, in the order counters() lists them.
struct Counter {
  const char* name;
  uint64_t value;
};

class CompressionStrategy {
 public:
  virtual ~CompressionStrategy() = default;
  virtual gcommCompression_t kind() const noexcept = 0;
  virtual const char* name() const noexcept = 0;  // the compression table's name ("int8")

  // The strategy for what this one does not compress (buckets, gradients, the
  // steps before it starts), kept in rest_: given once enabling can no longer
  // fail, and it cannot fail itself.
  void wrap(std::unique_ptr<CompressionStrategy> rest) noexcept { rest_ = std::move(rest); }
  // Statistics since enabling, in the C stats struct's order.
  virtual std::vector<Counter> counters() const { return {}; }
  // State (step counter, error feedback, ...) to and from device-independent host
  // bytes, between steps; load refuses a state of another kind or layout,
  // changing nothing. A shared state (StatePart::kShared) loads on any rank and
  // zeroes the residuals.
  virtual std::vector<uint8_t> save(StatePart part);
  virtual void load(const uint8_t* data, size_t bytes, StateOrigin origin);

  // Gradients carried outside the bucket buffer (planned at zero bytes there; with
  // views each gets a slot of its own).
  virtual bool takes(size_t /*grad*/) const noexcept { return false; }
  // The reducer laid out `plan`: once, when the strategy is enabled (a reducer
  // whose strategy takes gradients no longer rebuilds its plan).
  virtual void set_layout(const BucketPlan& /*plan*/) {}
  // A synced step begins (on the side stream, after the last finalize's epilogue).
  virtual void begin_step(const StrategyContext& /*ctx*/) {}
  // Bucket b is ready: all its gradients, or (complete == false, at finalize) the
  // marked ones, the others counting as zero. Communicates it and runs what it can
  // of the epilogue (average, times *inv_scale, Inf/NaN into *step_flag, cast back).
  virtual void run_bucket(size_t b, bool complete, const StrategyContext& ctx) = 0;
  // After every bucket's run_bucket: the work that needs the whole step's flag.
  virtual void end_step(const StrategyContext& /*ctx*/) {}

 protected:
  std::unique_ptr<CompressionStrategy> rest_;  // what wrap() gave (NULL: the all-reduce strategy itself)
};

}  // namespace gradcomm::reducer
