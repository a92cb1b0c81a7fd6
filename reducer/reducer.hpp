// The reducer: registered gradients, the bucket plan, the bucket buffer and the
// step state machine (begin -> mark ready ... -> finalize). A bucket is handed to
// the compression strategy (strategy.hpp: all-reduce, or one of compressions.hpp) on a side stream
// as soon as it and every bucket before it are complete, so every rank issues the
// same collectives in the same order and each bucket's epilogue overlaps the next
// buckets' communication; finalize orders the caller's stream after it all and
// runs the scaler's update. The C API (reducer/api/reducer_api.cpp) and the tests
// drive it; docs/reducer.md explains the design.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "gradcomm/reducer.h"
#include "kernels/grad_scaler.hpp"
#include "memory/caching_allocator.hpp"
#include "reducer/bucket_autotune.hpp"
#include "reducer/bucket_plan.hpp"
#include "reducer/grad_addresses.hpp"
#include "reducer/reducer_options.hpp"
#include "reducer/sharding.hpp"
#include "reducer/side_stream.hpp"
#include "reducer/step_scalars.hpp"
#include "reducer/step_timeline.hpp"
#include "reducer/straggler_monitor.hpp"
#include "reducer/strategy.hpp"

namespace gradcomm::reducer {

struct StrategySetup;

class Reducer {
 public:
  // `scaler` may be null; it must be on the communicator's device. Both must
  // outlive the reducer. With grad_as_bucket_view every grads[i].data is NULL.
  // `allocator`: where the reducer's buffers come from (default: a caching
  // allocator of its own on the communicator's device; tests inject faults here).
  Reducer(comm::Communicator& comm, const gcommTensor_t* grads, size_t n, const ReducerOptions& options,
          kernels::GradScaler* scaler, std::unique_ptr<memory::CachingAllocator> allocator = nullptr);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void begin_step(bool sync);
  // `expected` (when given): the address the caller believes the gradient has;
  // a different registered address is refused, changing nothing.
  void mark_ready(size_t index, gcommStream_t stream, std::optional<const void*> expected = std::nullopt);
  // Returns normally when the step succeeded; throws gcommInvalidState for unused
  // gradients (after completing the collectives) and whatever the communicator throws.
  void finalize(gcommStream_t stream);
  // Synchronizes `stream` and reads the flag of the last synced step.
  bool read_found_inf(gcommStream_t stream);
  const float* found_inf_flag() const { return scalars_->last_found_inf(); }

  void* grad_data(size_t index) const;
  void set_grad_data(size_t index, void* data);
  // Every gradient's address at once (n == the number registered): the new set
  // is checked as a whole, so gradients may trade places.
  void set_all_grad_data(void* const* data, size_t n);
  gcommReducerStats_t stats() const;
  gcommBucketAutotuneReport_t bucket_autotune() const;

  // Sharded mode (gcommReducerSharded; the Sharding component): this rank's shard
  // of bucket b; the parameters (registered like the gradients) and their
  // all-gather, between steps.
  std::vector<ShardPiece> shard(size_t bucket, gcommTensor_t* wire_shard) const;
  void set_params(const gcommTensor_t* params, size_t n);
  void all_gather_params(size_t bucket, gcommStream_t stream);
  // The L2 norm of the last synced step's gradients (after the epilogue: averaged
  // and unscaled) and, with max_norm > 0, clipping to it: the GradNorm component
  // (grad_norm.hpp), over every gradient or this rank's shard parts. The norm is a
  // scalar of the reducer's, valid until the next call.
  const float* clip_grad_norm(float max_norm, gcommStream_t stream);
  std::string describe() const;
  memory::CachingAllocator& allocator() { return *allocator_; }

  // Step timing and the step trace (step_timeline.hpp, chrome_trace.hpp).
  void set_timing(bool on);
  // The last measured synced step, how many were measured, and one in how many is.
  StepTiming step_timing(uint64_t* measured_steps, uint64_t* stride);
  // `path` may hold %r, %h, %p (per_rank_path); `steps` synced steps from the next one.
  void start_trace(const std::string& path, uint64_t steps);
  void stop_trace();

  // Straggler attribution (straggler_monitor.hpp): the framework's marks, and
  // the last window's verdict.
  void note_step_mark(StepMark mark);
  StragglerReport straggler_report() const;  // and the window's non-finite source

  // Compression (compressions.hpp): between steps, once. `config`: the kind's C
  // config struct (NULL: defaults); `spec`: the text form ("int8:block_size=128").
  // `grad_rows` (may be NULL): each gradient's first dimension. The strategy wraps
  // the all-reduce strategy; the plan is not rebuilt afterwards.
  void enable_compression(gcommCompression_t kind, const void* config, const size_t* grad_rows);
  void enable_compression(const std::string& spec, const size_t* grad_rows);
  // A strategy that `make` builds instead of the table's: the strategy contract
  // suite holds the table's entries, and deliberately broken fakes, to the contract
  // through it (tests/reducer/strategies/contract_test.cpp).
  using StrategyMaker = std::function<std::unique_ptr<CompressionStrategy>(const StrategySetup&)>;
  void enable_compression(const char* name, const StrategyMaker& make, const size_t* grad_rows);
  gcommCompression_t compression() const;
  // The compression in use and its statistics, read together.
  std::pair<gcommCompression_t, std::vector<Counter>> compression_in_use() const;
  // The compression's state, between steps.
  std::vector<uint8_t> save_compression(StatePart part = StatePart::kAll);
  void load_compression(const uint8_t* data, size_t bytes, StateOrigin origin = StateOrigin::kThisRank);

 private:
  enum class Phase { kIdle, kSynced, kAccumulating };

  // With views, the gradients `strategy` takes live in own_ instead of the buckets.
  void lay_out_buckets(const BucketPlan& plan, const CompressionStrategy& strategy);
  void launch_ready_buckets();
  void launch_bucket(size_t b);
  StrategyContext context();
  PlanOptions plan_options() const;  // from the options; the order is the caller's
  void finish_step(gcommStream_t stream);
  const float* inv_scale() const { return scaler_ != nullptr ? &scaler_->state()->inv_scale : nullptr; }
  void maybe_rebuild(const std::vector<size_t>& missing);
  // Buckets sized for the link (bucket_autotune.hpp; reducer_autotune.cpp).
  void refuse_bad_autotune() const;
  bool autotune_possible() const;
  void start_autotune();
  void measure_or_skip();
  void adopt_autotune(bool on);  // rank 0's decision (agree_settings)
  void skip_autotune(const std::string& why);
  void autotune_begin_step();
  void autotune_mark(size_t index);  // a measured step's mark, on the arrivals' clock
  void autotune_end_step();
  void choose_bucket_cap();
  LinkModel probe_link();
  std::vector<size_t> plan_order() const;  // the current plan's gradients, in order
  // Every rank's accounts of the window just ended, and the verdict (finalize).
  void attribute_stragglers();
  int first_own_nonfinite(gcommStream_t stream);
  void agree_settings();
  // A control collective over host floats (kAllGather or kBroadcast from rank 0);
  // `what` names it in a warning.
  void control_collective(comm::Collective op, const void* in, size_t bytes, void* out, const char* what);
  void broadcast_from_rank0(void* values, size_t bytes, const char* what);
  bool settings_agreed_ = false;
  void check_grad_location(const void* data, size_t index) const;
  // The sharded mode's component; gcommInvalidState naming `what` in all-reduce mode.
  Sharding& sharding(const char* what) const;
  // The gradient elements this rank's step result covers: every gradient, or in
  // sharded mode the pieces of its shards.
  std::vector<gcommTensor_t> owned_grad_parts() const;
  // A moved gradient's new tensor, checked alone (NULL, span, location) between steps.
  gcommTensor_t checked_move(size_t index, void* data) const;
  std::vector<size_t> unmarked() const;
  // Once a step fails after something was launched, ranks may disagree on what
  // was issued: every later call fails with this, naming the first failure.
  void throw_if_failed() const;
  template <class F>
  void or_fail(F&& work);
  void check_index(size_t index) const;

  comm::Communicator& comm_;
  kernels::GradScaler* scaler_;
  const ReducerOptions options_;
  const gcommDevice_t device_;
  std::vector<gcommTensor_t> grads_;  // registration order; views point into buckets_ (or own_)
  std::vector<GradSpec> specs_;
  GradAddresses addresses_;  // without views: no two gradients share memory

  SideStream side_;  // declared before the allocator: it must outlive it
  StepTimeline timeline_;
  StragglerMonitor stragglers_;
  const bool epilogue_at_finalize_;  // GRADCOMM_REDUCER_EPILOGUE=finalize
  std::unique_ptr<memory::CachingAllocator> allocator_;
  BucketPlan plan_;
  std::vector<void*> bucket_data_;  // each bucket's place in buckets_
  void* buckets_ = nullptr;
  size_t bucket_buffer_bytes_ = 0;   // allocated, padding included
  size_t bucket_payload_bytes_ = 0;  // without alignment padding between buckets
  // With views and a strategy that takes gradients (PowerSGD): those gradients
  // (outside the buckets, which carry only the others), one aligned slot each.
  void* own_ = nullptr;
  std::unique_ptr<StepScalars> scalars_;  // the step's flags and the norm, on the device
  bool synced_result_ = false;            // the gradients hold a synced step's result
  std::unique_ptr<Sharding> sharding_;    // sharded mode's component (NULL in all-reduce mode)

  mutable std::mutex mutex_;
  Phase phase_ = Phase::kIdle;
  std::vector<uint8_t> marked_;
  std::vector<size_t> remaining_;  // per bucket: gradients not yet marked
  std::vector<std::vector<gcommStream_t>> bucket_streams_;
  size_t next_bucket_ = 0;
  size_t marked_count_ = 0;
  gcommStream_t first_mark_stream_ = nullptr;  // this step's; with marks_on_one_stream_
  bool marks_on_one_stream_ = true;            // for the end-of-backward stamp (StepTimeline)
  std::vector<size_t> ready_order_;            // first synced step only (for the rebuild)
  bool rebuild_pending_;
  // The caps in use: the config's until the bucket autotune chooses.
  size_t bucket_cap_bytes_;
  size_t first_bucket_bytes_;
  std::unique_ptr<ArrivalRecorder> arrivals_;  // while the autotune measures
  bool recording_arrivals_ = false;            // in a measured step
  double last_step_end_us_ = 0;                // the arrivals' origin: the last synced step's end
  gcommBucketAutotuneReport_t autotune_;
  // Makes the strategy (make: a compression table factory bound to its config),
  // lays it out (rebuilding the plan when it takes gradients out of the wire) and
  // puts it in front of the all-reduce strategy.
  template <class Make>
  void install(const char* name, Make&& make, const size_t* grad_rows);
  gcommReducerStats_t stats_{};
  std::unique_ptr<CompressionStrategy> strategy_;
  gcommStatus_t failed_status_ = gcommSuccess;
  std::string failed_message_;
};

}  // namespace gradcomm::reducer
