#include "reducer/reducer.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "comm/flight_recorder.hpp"
#include "comm/group.hpp"
#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"
#include "kernels/ops.hpp"
#include "memory/device_bytes.hpp"
#include "reducer/chrome_trace.hpp"
#include "reducer/compressions.hpp"
#include "reducer/grad_norm.hpp"
#include "reducer/strategies/allreduce.hpp"

namespace gradcomm::reducer {

namespace {

static_assert(GCOMM_MAX_TENSORS <= (size_t{1} << 24),
              "the plan broadcast sends gradient indices as floats, exact below 2^24");

// Waits for every stream of the device (no-op on the host): for a one-time call
// that moves memory the caller may still be using on streams the reducer cannot name.
void synchronize_device(const gcommDevice_t& device) {
  if (device.kind == gcommDeviceHost) return;
  DeviceGuard guard(device);
  GCOMM_CUDA_CHECK(cudaDeviceSynchronize());
}

std::string list_indices(const std::vector<size_t>& v, size_t limit = 20) {
  std::string s;
  for (size_t k = 0; k < v.size() && k < limit; ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  if (v.size() > limit) s += cat(", ... (", v.size() - limit, " more)");
  return s;
}

// A host reducer with peers runs its buckets on the communicator's lane, so their
// collectives overlap backward (comm/host_lane.hpp); with the setting off, or on a
// transport that only the application's threads may call (MPI below
// MPI_THREAD_MULTIPLE: no lane), they run inside the mark-ready call.
comm::HostLane* host_lane_for(comm::Communicator& comm, bool host_thread) {
  if (comm.device().kind != gcommDeviceHost || comm.size() < 2 || !host_thread) return nullptr;
  return comm.host_lane();
}

// Inside gcommGroupStart/End an NCCL all-reduce only launches at the group's
// end, while the reducer's kernels would run at once, before it: refused.
void refuse_in_group(const char* call) {
  if (comm::in_group())
    fail(gcommInvalidState, call,
         " inside gcommGroupStart/End: the reducer issues its own collectives and kernels in "
         "order, which a group would reorder; end the group first");
}

}  // namespace

Reducer::Reducer(comm::Communicator& comm, const gcommTensor_t* grads, size_t n,
                 const ReducerOptions& options, kernels::GradScaler* scaler,
                 std::unique_ptr<memory::CachingAllocator> allocator)
    : comm_(comm),
      scaler_(scaler),
      options_(options),
      device_(comm.device()),
      side_(comm.device(), host_lane_for(comm, options.settings.host_thread)),
      timeline_(comm.device(), options.settings.timing.value_or(comm.device().kind == gcommDeviceHost),
                TimingBudget{options.settings.timing_budget_percent / 100}),
      stragglers_(comm.rank(), comm.size(),
                  options.settings.straggler_window.value_or(comm.device().kind == gcommDeviceHost ? 10 : 0),
                  AttributionRules{options.settings.straggler_min_ms * 1e3}),
      epilogue_at_finalize_(options.settings.epilogue_at_finalize),
      // Views and shards keep their first plan: the caller holds addresses into it,
      // or an optimizer's shard layout.
      rebuild_pending_(options.rebuild_buckets && !options.grad_as_bucket_view && !options.sharded),
      bucket_cap_bytes_(options.bucket_cap_bytes),
      first_bucket_bytes_(options.first_bucket_bytes),
      autotune_(GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER) {
  require(grads != nullptr || n == 0, "argument 'grads' is NULL but num_grads is ", n);
  require(n > 0, "a reducer needs at least one gradient (num_grads is 0)");
  refuse_bad_autotune();  // before anything is allocated
  check_list_length(n, "num_grads");
  if (scaler_ != nullptr)
    require(same_device(scaler_->device(), device_), "the scaler is on ", describe_device(scaler_->device()),
            " but the communicator is on ", describe_device(device_));
  for (size_t i = 0; i < n; ++i) {
    const gcommTensor_t& g = grads[i];
    checked_dtype(g.dtype, cat("grads[", i, "].dtype").c_str());
    checked_span(g.data, g.count, g.dtype, cat("grads[", i, "]").c_str());
    if (options_.grad_as_bucket_view) {
      require(g.data == nullptr, "grads[", i,
              "].data must be NULL with grad_as_bucket_view (gradcomm allocates it)");
      require(options_.wire_dtype == kWireSameAsGrad || options_.wire_dtype == g.dtype,
              "grad_as_bucket_view needs the wire dtype to be the gradients' dtype (grads[", i, "] is ",
              dtype_name(g.dtype), ")");
    } else {
      require(g.data != nullptr || g.count == 0, "grads[", i, "] has ", g.count,
              " elements but its data is NULL");
      if (g.count > 0) check_grad_location(g.data, i);
    }
    grads_.push_back(g);
    specs_.push_back(GradSpec{g.count, g.dtype});
  }
  if (!options_.grad_as_bucket_view) addresses_ = GradAddresses(grads_);
  // The buckets are copied to and from the gradients on the communicator's device:
  // an allocator of another device's memory fails at the first copy (the GPU contract
  // suite once passed a host allocator: "cudaMemcpyAsync ... invalid argument").
  if (allocator != nullptr)
    require(same_device(allocator->device(), device_), "the allocator is on ",
            describe_device(allocator->device()), " but the communicator is on ", describe_device(device_));
  allocator_ = allocator != nullptr
                   ? std::move(allocator)
                   : memory::make_caching_allocator(device_, gcommMemoryDefault, memory::AllocatorOptions{});
  if (options_.sharded) sharding_ = std::make_unique<Sharding>(comm_, *allocator_, side_);
  scalars_ = std::make_unique<StepScalars>(*allocator_, side_, device_,
                                           sharding_ != nullptr ? sharding_->shards() : 0, n);
  strategy_ = std::make_unique<AllReduceStrategy>();
  lay_out_buckets(plan_buckets(specs_, plan_options()), *strategy_);
  side_.synchronize();  // the scalars and the zeroed buffers are in place before the first step
  marked_.assign(n, 0);
  start_autotune();
  const ReducerSettings& settings = options_.settings;
  if (!settings.trace_file.empty()) {
    const std::string path = per_rank_path(settings.trace_file, comm_.rank(), comm_.size());
    try {
      timeline_.start_trace(std::make_unique<ChromeTrace>(path, comm_.rank(), comm_.size(),
                                                          describe_device(device_), settings.trace_first_step,
                                                          settings.trace_steps));
      GCOMM_INFO(REDUCER, "GRADCOMM_TRACE_FILE: tracing synced steps ", settings.trace_first_step, " to ",
                 settings.trace_first_step + settings.trace_steps - 1, " into ", path);
    } catch (const Error& e) {
      GCOMM_WARN("GRADCOMM_TRACE_FILE: ", e.message(), "; no step trace is recorded");
    }
  }
  GCOMM_INFO(REDUCER, "reducer on ", describe_device(device_), ": ", n, " gradients, ", plan_.buckets.size(),
             " buckets\n", describe_plan(plan_));
}

Reducer::~Reducer() {
  try {
    timeline_.stop_trace();  // a trace still running keeps what it measured
  } catch (const std::exception& e) {
    GCOMM_WARN("reducer destroy: ", e.what());
  }
  try {
    side_.quiesce();
    strategy_.reset();  // its buffers come from the allocator
    if (buckets_ != nullptr) allocator_->deallocate(buckets_, side_.stream());
    if (own_ != nullptr) allocator_->deallocate(own_, side_.stream());
    sharding_.reset();  // its staging buffer comes from the allocator
    scalars_.reset();
    // The allocator's teardown records events on the streams it served: it must
    // go while the side stream still exists.
    allocator_.reset();
  } catch (const std::exception& e) {
    GCOMM_WARN("reducer destroy: ", e.what());
  }
}

void Reducer::check_grad_location(const void* data, size_t index) const {
  require_usable(pointer_info(data), device_, "grads", static_cast<long long>(index),
                 "the communicator is on");
}

PlanOptions Reducer::plan_options() const {
  PlanOptions po;
  po.bucket_cap_bytes = bucket_cap_bytes_;
  po.first_bucket_bytes = first_bucket_bytes_;
  po.wire_dtype = options_.wire_dtype;
  po.shards = sharding_ != nullptr ? sharding_->shards() : 1;
  return po;
}

StrategyContext Reducer::context() {
  return StrategyContext{comm_,
                         side_,
                         device_,
                         plan_,
                         grads_,
                         marked_,
                         bucket_data_.data(),
                         options_.average,
                         options_.grad_as_bucket_view,
                         sharding_.get(),
                         epilogue_at_finalize_,
                         inv_scale(),
                         scalars_->step_found_inf(),
                         stragglers_.enabled() ? scalars_->own_nonfinite() : nullptr,
                         scalars_->one(),
                         *strategy_,
                         timeline_};
}

// Lays the plan's buckets out in one allocation (bucket b at bucket_data_[b])
// and, with views, points the gradients into it (those `strategy` takes into
// own_) and moves their contents there. The old buffers are freed in order on
// the side stream: the reducer's own work on them is ordered before that; with
// views the caller's is not, so install() first waits for the device.
// Nothing of the reducer changes unless every step succeeded.
void Reducer::lay_out_buckets(const BucketPlan& plan, const CompressionStrategy& strategy) {
  const bool views = options_.grad_as_bucket_view;
  std::vector<size_t> bucket_bytes, own_bytes(grads_.size(), 0);
  size_t total = 0, payload = 0, own_total = 0;
  for (const Bucket& bucket : plan.buckets) {
    bucket_bytes.push_back(bucket.wire_bytes());
    payload += bucket.wire_bytes();
  }
  const std::vector<size_t> offsets = aligned_layout(bucket_bytes, &total, "the buckets");
  if (views)  // the gradients the strategy carries, one slot each (none for the others)
    for (size_t i = 0; i < grads_.size(); ++i)
      if (strategy.takes(i)) own_bytes[i] = grads_[i].count * dtype_size(grads_[i].dtype);
  const std::vector<size_t> own_offset = aligned_layout(own_bytes, &own_total, "the carried gradients");
  void* wire = nullptr;
  void* own = nullptr;
  std::vector<void*> view_data;  // with views: each gradient's new address
  try {
    wire = total > 0 ? allocator_->allocate(total, side_.stream()) : nullptr;
    own = own_total > 0 ? allocator_->allocate(own_total, side_.stream()) : nullptr;
    // Padding is reduced with the payload: zeros keep it finite and initialized.
    memory::zero_bytes(wire, total, device_, side_.stream());
    memory::zero_bytes(own, own_total, device_, side_.stream());
    // What follows reads or frees the old buffers: after the last finalize's epilogue.
    side_.wait_for_marked();
    if (views) {
      view_data.assign(grads_.size(), nullptr);
      for (size_t b = 0; b < plan.buckets.size(); ++b)
        for (const BucketEntry& e : plan.buckets[b].entries) {
          const gcommTensor_t& g = grads_[e.grad];
          if (g.count == 0) continue;
          view_data[e.grad] = strategy.takes(e.grad)
                                  ? static_cast<char*>(own) + own_offset[e.grad]
                                  : static_cast<char*>(wire) + offsets[b] + e.offset * dtype_size(g.dtype);
        }
      // The contents follow.
      for (size_t i = 0; i < grads_.size(); ++i)
        if (grads_[i].data != nullptr)
          memory::copy_bytes(view_data[i], grads_[i].data, grads_[i].count * dtype_size(grads_[i].dtype),
                             device_, side_.stream(), cudaMemcpyDeviceToDevice);
    }
  } catch (...) {
    if (wire != nullptr) allocator_->deallocate(wire, side_.stream());
    if (own != nullptr) allocator_->deallocate(own, side_.stream());
    throw;
  }
  if (buckets_ != nullptr) allocator_->deallocate(buckets_, side_.stream());
  if (own_ != nullptr) allocator_->deallocate(own_, side_.stream());
  buckets_ = wire;
  own_ = own;
  if (views)
    for (size_t i = 0; i < grads_.size(); ++i) grads_[i].data = view_data[i];
  bucket_buffer_bytes_ = total;
  bucket_payload_bytes_ = payload;
  bucket_data_.resize(plan.buckets.size());
  for (size_t b = 0; b < plan.buckets.size(); ++b)
    bucket_data_[b] = static_cast<char*>(buckets_) + offsets[b];
  if (sharding_ != nullptr) sharding_->lay_out(plan, specs_);
  plan_ = plan;
  remaining_.assign(plan_.buckets.size(), 0);
  bucket_streams_.assign(plan_.buckets.size(), {});
}

void Reducer::throw_if_failed() const {
  if (failed_status_ != gcommSuccess)
    fail(failed_status_, "the reducer failed in an earlier step and only accepts destroy: ", failed_message_);
}

// Runs work that may leave collectives issued on some ranks and not others; a
// failure there is final for this reducer.
template <class F>
void Reducer::or_fail(F&& work) {
  try {
    work();
  } catch (const Error& e) {
    side_.drain_host();  // queued work may still use what the caller gets back
    failed_status_ = e.status();
    failed_message_ = e.message();
    phase_ = Phase::kIdle;
    timeline_.abandon();
    stragglers_.abandon();
    throw;
  } catch (...) {
    side_.drain_host();
    failed_status_ = gcommInternalError;  // failed first: naming why may itself run out of memory
    phase_ = Phase::kIdle;
    timeline_.abandon();
    stragglers_.abandon();
    try {
      const Error e = as_error(std::current_exception());  // std::bad_alloc: gcommOutOfMemory
      failed_status_ = e.status();
      failed_message_ = e.message();
    } catch (...) {
      failed_status_ = gcommOutOfMemory;
    }
    throw;
  }
}

void Reducer::check_index(size_t index) const {
  require(index < grads_.size(), "gradient index ", index, " is out of range (", grads_.size(),
          " gradients registered)");
}

void Reducer::begin_step(bool sync) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  refuse_in_group("gcommReducerBeginStep");
  if (phase_ != Phase::kIdle)
    fail(gcommInvalidState,
         "a step is already in progress: call gcommReducerFinalize before beginning another");
  std::fill(marked_.begin(), marked_.end(), 0);
  marked_count_ = 0;
  marks_on_one_stream_ = true;
  next_bucket_ = 0;
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    remaining_[b] = plan_.buckets[b].entries.size();
    bucket_streams_[b].clear();
  }
  ready_order_.clear();
  synced_result_ = false;
  if (sync)
    or_fail([&] {
      // Side-stream work of this step (the step flag, then the buckets) comes after
      // the last finalize's epilogue on the caller's stream, which read the flag and
      // updated the scale that this step's epilogues read.
      side_.wait_for_marked();
      timeline_.begin_step(stats_.synced_steps + 1, side_.stream());
      stragglers_.begin_step();
      memory::zero_bytes(scalars_->step_found_inf(), sizeof(float), device_, side_.stream());
      if (stragglers_.enabled() && !grads_.empty())
        memory::zero_bytes(scalars_->own_nonfinite(), grads_.size() * sizeof(float), device_, side_.stream());
      strategy_->begin_step(context());
      autotune_begin_step();
    });
  phase_ = sync ? Phase::kSynced : Phase::kAccumulating;
}

void Reducer::mark_ready(size_t index, gcommStream_t stream, std::optional<const void*> expected) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  refuse_in_group("gcommReducerMarkReady");
  if (phase_ == Phase::kIdle)
    fail(gcommInvalidState, "gradient ", index,
         " was marked ready outside a step: call gcommReducerBeginStep first");
  check_index(index);
  // The guard against a caller whose gradient memory was replaced behind the
  // reducer's back (freed and reallocated): refused before anything reads it.
  if (expected && *expected != grads_[index].data && grads_[index].count > 0)
    fail(gcommInvalidArgument, "gradient ", index, " is at ", *expected, " but the reducer has it at ",
         grads_[index].data,
         ": its memory was replaced (PyTorch's zero_grad(set_to_none=True) frees it, an "
         "optimizer may assign a new one); point the reducer at the new memory between steps "
         "(gcommReducerSetGradData) or keep the gradients in place");
  if (marked_[index]) fail(gcommInvalidState, "gradient ", index, " was already marked ready in this step");
  marked_[index] = 1;
  if (marked_count_ == 0)
    first_mark_stream_ = stream;
  else if (stream != first_mark_stream_)
    marks_on_one_stream_ = false;
  ++marked_count_;
  if (phase_ == Phase::kAccumulating) return;
  timeline_.marked();
  if (rebuild_pending_) ready_order_.push_back(index);
  if (recording_arrivals_) autotune_mark(index);
  size_t b = plan_.bucket_of[index];
  auto& streams = bucket_streams_[b];
  if (std::find(streams.begin(), streams.end(), stream) == streams.end()) streams.push_back(stream);
  if (--remaining_[b] == 0) timeline_.instant("ready", static_cast<int>(b));
  // Backward ends here, before this mark's launches, where this stream holds every
  // gradient; marks on several streams leave it to finalize's stream.
  if (marked_count_ == grads_.size() && marks_on_one_stream_) timeline_.backward_done(stream);
  if (marked_count_ == grads_.size()) stragglers_.backward_done(comm_.transport());
  or_fail([&] { launch_ready_buckets(); });
}

// Buckets launch strictly in plan order: bucket k waits for buckets 0..k-1 even
// if it completes first, so every rank issues the same collectives in the same order.
void Reducer::launch_ready_buckets() {
  while (next_bucket_ < plan_.buckets.size() && remaining_[next_bucket_] == 0) launch_bucket(next_bucket_++);
}

void Reducer::launch_bucket(size_t b) {
  GCOMM_TRACE(REDUCER, "step ", stats_.synced_steps + 1, ": bucket ", b, " of ", plan_.buckets.size(), " (",
              plan_.buckets[b].entries.size(), " gradients, ", remaining_[b], " unmarked) launched after ",
              marked_count_, " of ", grads_.size(), " gradients were marked ready");
  for (gcommStream_t s : bucket_streams_[b]) side_.wait_for(s);
  // Two words of capture: std::function keeps them without allocating.
  const size_t job = b * 2 + (remaining_[b] == 0 ? 1 : 0);
  side_.run([this, job] {
    comm::FlightBucketScope in_bucket(static_cast<int>(job / 2));  // the flight record names the bucket
    strategy_->run_bucket(job / 2, job % 2 == 1, context());
  });
  ++stats_.buckets_launched;
}

std::vector<size_t> Reducer::unmarked() const {
  std::vector<size_t> v;
  for (size_t i = grads_.size(); i-- > 0;)
    if (!marked_[i]) v.push_back(i);
  std::reverse(v.begin(), v.end());
  return v;
}

void Reducer::finalize(gcommStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  refuse_in_group("gcommReducerFinalize");
  if (phase_ == Phase::kIdle)
    fail(gcommInvalidState, "finalize without a step: call gcommReducerBeginStep first");
  if (phase_ == Phase::kAccumulating) {
    phase_ = Phase::kIdle;
    ++stats_.accumulation_steps;
    return;
  }
  phase_ = Phase::kIdle;  // whatever happens below, the next step can begin
  std::vector<size_t> missing = unmarked();
  bool refuse = !missing.empty() && !options_.unused_as_zero;
  or_fail([&] {
    timeline_.backward_done(stream);
    stragglers_.backward_done(comm_.transport());
    // Missing gradients send zeros: the collectives complete on every rank, and so
    // does the step (the same gradients and loss scale as on the other ranks).
    while (next_bucket_ < plan_.buckets.size()) launch_bucket(next_bucket_++);
    side_.run([this] {
      strategy_->end_step(context());
      if (sharding_ != nullptr) {
        TimedSpan span(timeline_, "found-inf max", SpanKind::kComm, -1, side_.stream());
        sharding_->agree_on_found_inf(scalars_->step_found_inf());
      }
    });
    side_.make_wait(stream);
    {
      TimedSpan finish(timeline_, scaler_ != nullptr ? "scaler update" : "found-inf flag", SpanKind::kCompute,
                       -1, stream, Track::kCaller);
      finish_step(stream);
    }
    timeline_.end_step(stream);
    side_.mark(stream);
    ++stats_.synced_steps;
    if (!settings_agreed_) agree_settings();
    if (stragglers_.enabled() && stragglers_.end_step(comm_.transport(), first_own_nonfinite(stream)))
      attribute_stragglers();
    GCOMM_TRACE(REDUCER, "step ", stats_.synced_steps, " finalized: ", plan_.buckets.size(), " buckets, ",
                missing.size(), " gradients never marked");
    synced_result_ = true;
    maybe_rebuild(missing);  // every rank rebuilds at the same step
    autotune_end_step();     // ... and chooses its bucket cap at the same step
  });
  if (refuse)
    fail(gcommInvalidState, missing.size(), " of ", grads_.size(),
         " gradients were never marked ready in this step: ", list_indices(missing),
         ". The step was completed as if they were zero, as on the other ranks (which cannot know), so every "
         "rank holds the same gradients and loss scale; do not apply it. Mark every gradient ready, or set "
         "unused_grads = gcommUnusedAsZero.");
}

// The end of the epilogue, on the caller's stream once it waits for the side
// stream: the step's Inf/NaN flag becomes the readable one and the scaler's
// found-inf, and the scaler's update runs.
void Reducer::finish_step(gcommStream_t stream) {
  const float* step = scalars_->step_found_inf();
  memory::copy_bytes(scalars_->last_found_inf(), step, sizeof(float), device_, stream,
                     cudaMemcpyDeviceToDevice);
  if (scaler_ != nullptr) {
    memory::copy_bytes(&scaler_->state()->found_inf, step, sizeof(float), device_, stream,
                       cudaMemcpyDeviceToDevice);
    scaler_->update(stream);
  }
}

// The reducer's own control traffic (the rebuild's order, the straggler settings
// and accounts): a small collective over host values, staged where the
// communicator reads (device memory on a GPU) on the side stream and waited for.
// The staging is freed on every path: a failed collective must not leak it.
// kAllGather: `out` takes size() times `bytes`; kBroadcast: in place, `out` == `in`.
void Reducer::control_collective(comm::Collective op, const void* in, size_t bytes, void* out,
                                 const char* what) {
  const size_t out_bytes = op == comm::Collective::kAllGather ? bytes * static_cast<size_t>(comm_.size()) : 0;
  std::unique_ptr<void, std::function<void(void*)>> hold(
      allocator_->allocate(bytes + out_bytes, side_.stream()), [this, what](void* p) {
        try {
          allocator_->deallocate(p, side_.stream());
        } catch (const std::exception& e) {
          GCOMM_WARN("reducer: freeing the staging of ", what, ": ", e.what());
        }
      });
  char* send = static_cast<char*>(hold.get());
  char* recv = out_bytes > 0 ? send + bytes : send;
  memory::copy_bytes(send, in, bytes, device_, side_.stream(), cudaMemcpyHostToDevice);
  comm_.collective(comm::owned_buffers_call(op, send, recv, bytes / sizeof(float), gcommFloat32,
                                            side_.stream(), gcommSum, /*root=*/0));
  memory::copy_bytes(out, recv, out_bytes > 0 ? out_bytes : bytes, device_, side_.stream(),
                     cudaMemcpyDeviceToHost);
  side_.synchronize();
}

void Reducer::broadcast_from_rank0(void* values, size_t bytes, const char* what) {
  control_collective(comm::Collective::kBroadcast, values, bytes, values, what);
}

// After the first synced step: every rank adopts rank 0's ready order (the
// gradients it never saw come last), and the plan is rebuilt if it changes.
void Reducer::maybe_rebuild(const std::vector<size_t>& missing) {
  if (!rebuild_pending_) return;
  rebuild_pending_ = false;
  size_t n = grads_.size();
  std::vector<float> order(n);
  size_t k = 0;
  for (size_t i : ready_order_) order[k++] = static_cast<float>(i);
  for (size_t j = missing.size(); j-- > 0;) order[k++] = static_cast<float>(missing[j]);
  ready_order_.clear();
  broadcast_from_rank0(order.data(), n * sizeof(float), "the rebuild's order");
  PlanOptions po = plan_options();
  po.order.resize(n);
  for (size_t i = 0; i < n; ++i) po.order[i] = static_cast<size_t>(order[i]);
  BucketPlan rebuilt = plan_buckets(specs_, po);
  stats_.rebuilt = 1;
  if (same_plan(rebuilt, plan_)) return;
  lay_out_buckets(rebuilt, *strategy_);
  GCOMM_INFO(REDUCER, "reducer: plan rebuilt in rank 0's ready order\n", describe_plan(plan_));
}

// Once, at the first synced step: every rank takes rank 0's straggler window and
// threshold, and whether the bucket autotune runs. Each rank reads its own
// environment, and both mean collectives inside finalize (a window's all-gather,
// the autotune's probe and all-gather): ranks that disagreed would issue
// different collectives.
void Reducer::agree_settings() {
  settings_agreed_ = true;
  if (comm_.size() < 2) return;
  float settings[3] = {static_cast<float>(stragglers_.window()),
                       static_cast<float>(stragglers_.min_late_ms()),
                       autotune_.state == gcommBucketAutotuneStateMeasuring ? 1.f : 0.f};
  const float own_autotune = settings[2];
  broadcast_from_rank0(settings, sizeof settings, "the straggler and bucket autotune settings");
  const int window = static_cast<int>(settings[0]);
  if (window != stragglers_.window() || settings[1] != static_cast<float>(stragglers_.min_late_ms()))
    GCOMM_INFO(REDUCER, "reducer: straggler window ", window, " and threshold ", settings[1],
               " ms taken from rank 0 (this rank's were ", stragglers_.window(), " and ",
               stragglers_.min_late_ms(), ")");
  stragglers_.adopt(window, settings[1]);
  if (settings[2] != own_autotune) adopt_autotune(settings[2] == 1.f);
}

// Every rank's accounts travel as float pairs (an all-gather copies bits).
void Reducer::attribute_stragglers() {
  const std::vector<RankStep>& mine = stragglers_.accounts();
  std::vector<RankStep> all(mine.size() * static_cast<size_t>(comm_.size()));
  control_collective(comm::Collective::kAllGather, mine.data(), mine.size() * sizeof(RankStep), all.data(),
                     "the straggler accounts");
  stragglers_.attribute(all, stats_.synced_steps);
  timeline_.set_clock_offset(stragglers_.report().clock_offset_us);
}

// The first gradient, in plan order (about the order backward made them), whose
// own packed value was non-finite on this rank this step; -1: none. On a GPU the
// flags are read back here (a wait for the step's work: the straggler window is
// off there by default).
int Reducer::first_own_nonfinite(gcommStream_t stream) {
  std::vector<float> flags(grads_.size());
  if (flags.empty()) return -1;
  memory::copy_bytes(flags.data(), scalars_->own_nonfinite(), flags.size() * sizeof(float), device_, stream,
                     cudaMemcpyDeviceToHost);
  side_.synchronize(stream);
  for (const Bucket& b : plan_.buckets)
    for (const BucketEntry& e : b.entries)
      if (flags[e.grad] > 0.0f) return static_cast<int>(e.grad);
  return -1;
}

void Reducer::note_step_mark(StepMark mark) {
  std::lock_guard<std::mutex> lock(mutex_);
  stragglers_.note(mark);
}

StragglerReport Reducer::straggler_report() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stragglers_.report();
}

bool Reducer::read_found_inf(gcommStream_t stream) {
  float flag = 0.0f;
  memory::copy_bytes(&flag, scalars_->last_found_inf(), sizeof flag, device_, stream, cudaMemcpyDeviceToHost);
  side_.synchronize(stream);
  return flag > 0.0f;
}

void* Reducer::grad_data(size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  check_index(index);
  return grads_[index].data;
}

gcommTensor_t Reducer::checked_move(size_t index, void* data) const {
  check_index(index);
  if (options_.grad_as_bucket_view)
    fail(gcommInvalidState, "gradient ", index,
         " lives in gradcomm's bucket (grad_as_bucket_view); it cannot move");
  if (phase_ != Phase::kIdle)
    fail(gcommInvalidState, "gradients cannot move during a step (call finalize first)");
  gcommTensor_t moved = grads_[index];
  moved.data = data;
  require(data != nullptr || moved.count == 0, "data is NULL but gradient ", index, " has ", moved.count,
          " elements");
  checked_span(data, moved.count, moved.dtype, cat("gradient ", index).c_str());
  if (moved.count > 0) check_grad_location(data, index);
  return moved;
}

void Reducer::set_grad_data(size_t index, void* data) {
  std::lock_guard<std::mutex> lock(mutex_);
  gcommTensor_t moved = checked_move(index, data);
  addresses_.move(index, grads_[index], moved);
  grads_[index] = moved;
}

void Reducer::set_all_grad_data(void* const* data, size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  require(data != nullptr, "argument 'data' must not be NULL");
  require(n == grads_.size(), "num_grads is ", n, " but the reducer has ", grads_.size(), " gradients");
  std::vector<gcommTensor_t> moved(n);
  for (size_t i = 0; i < n; ++i) moved[i] = checked_move(i, data[i]);
  GradAddresses addresses(moved);  // the new set as a whole
  addresses_ = std::move(addresses);
  grads_ = std::move(moved);
}

gcommReducerStats_t Reducer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  gcommReducerStats_t s = stats_;
  s.num_buckets = plan_.buckets.size();
  s.wire_bytes_per_step = bucket_payload_bytes_;
  s.grad_bytes = 0;
  for (const auto& g : grads_) s.grad_bytes += g.count * dtype_size(g.dtype);
  return s;
}

void Reducer::set_timing(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kIdle) fail(gcommInvalidState, "step timing can only be switched between steps");
  timeline_.set_enabled(on);
}

StepTiming Reducer::step_timing(uint64_t* measured_steps, uint64_t* stride) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeline_.poll(false);
  *measured_steps = timeline_.measured_steps();
  *stride = timeline_.stride();
  return timeline_.last();
}

void Reducer::start_trace(const std::string& path, uint64_t steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kIdle) fail(gcommInvalidState, "a step trace can only be started between steps");
  require(!path.empty(), "the trace path is empty");
  const uint64_t next = stats_.synced_steps + 1;
  timeline_.stop_trace();  // one running already is written first (and its failure reported)
  timeline_.start_trace(std::make_unique<ChromeTrace>(per_rank_path(path, comm_.rank(), comm_.size()),
                                                      comm_.rank(), comm_.size(), describe_device(device_),
                                                      next, steps));
}

void Reducer::stop_trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!timeline_.tracing()) return;  // none started, or it took all its steps and was written
  if (phase_ != Phase::kIdle) fail(gcommInvalidState, "a step trace can only be stopped between steps");
  timeline_.stop_trace();
}

std::string Reducer::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cat("reducer: ", grads_.size(), " gradients, ", plan_.buckets.size(), " buckets, ",
             bucket_payload_bytes_, " wire bytes per step on ", describe_device(device_), " (rank ",
             comm_.rank(), " of ", comm_.size(), ")", stats_.rebuilt ? ", rebuilt in ready order" : "", "\n",
             describe_plan(plan_));
}

template <class Make>
void Reducer::install(const char* name, Make&& make, const size_t* grad_rows) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  if (phase_ != Phase::kIdle)
    fail(gcommInvalidState, "compression (", name, ") can only be enabled between steps");
  if (strategy_->kind() != gcommCompressionNone)
    fail(gcommInvalidState, "cannot enable ", name, ": this reducer already compresses with ",
         strategy_->name(), " (one compression strategy per reducer)");
  const StrategySetup setup{grads_,           grad_rows,    options_.grad_as_bucket_view,
                            options_.sharded, comm_.size(), comm_.rank(),
                            *allocator_,      side_,        device_};
  std::unique_ptr<CompressionStrategy> strategy = make(setup);
  // Gradients the strategy carries itself take no bytes of the wire but count
  // toward the buckets' caps (GradSpec::carried); the plan keeps its order.
  bool takes_any = false;
  for (size_t i = 0; i < grads_.size(); ++i) takes_any = takes_any || strategy->takes(i);
  side_.synchronize();
  if (takes_any) {
    PlanOptions po = plan_options();
    for (const Bucket& bucket : plan_.buckets)
      for (const BucketEntry& e : bucket.entries) po.order.push_back(e.grad);
    std::vector<GradSpec> specs = specs_;
    for (size_t i = 0; i < specs.size(); ++i) specs[i].carried = strategy->takes(i);
    const BucketPlan plan = plan_buckets(specs, po);
    // With views the gradients move: whatever the caller queued on its own streams
    // that reads or writes them at their old addresses (an optimizer step after the
    // last finalize, zeroing) must be done before they are copied and freed.
    if (options_.grad_as_bucket_view) synchronize_device(device_);
    or_fail([&] { lay_out_buckets(plan, *strategy); });  // with views, every gradient's address may change
  }
  or_fail([&] {
    strategy->set_layout(plan_);
    side_.synchronize();  // its state (zeros) and the moved gradients are in place before the first step
  });
  rebuild_pending_ = false;  // the strategy's state is laid out by this plan
  if (arrivals_ != nullptr)
    skip_autotune(cat("compression ", name, " was enabled: its buckets' state is laid out by this plan"));
  strategy->wrap(std::move(strategy_));
  strategy_ = std::move(strategy);
  std::string stats;
  for (const Counter& c : strategy_->counters()) stats += cat(", ", c.name, " ", c.value);
  GCOMM_INFO(REDUCER, "reducer: compression ", strategy_->name(), " enabled", stats);
}

void Reducer::enable_compression(gcommCompression_t kind, const void* config, const size_t* grad_rows) {
  const CompressionEntry& entry = compression_entry(kind);
  install(
      entry.name, [&](const StrategySetup& setup) { return entry.from_config(config, setup); }, grad_rows);
}

void Reducer::enable_compression(const std::string& spec, const size_t* grad_rows) {
  std::string text;
  const CompressionEntry& entry = compression_entry_of_text(spec, &text);
  OptionText options(entry.name, text);
  install(
      entry.name, [&](const StrategySetup& setup) { return entry.from_text(options, setup); }, grad_rows);
}

void Reducer::enable_compression(const char* name, const StrategyMaker& make, const size_t* grad_rows) {
  install(name, make, grad_rows);
}

gcommCompression_t Reducer::compression() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return strategy_->kind();
}

std::pair<gcommCompression_t, std::vector<Counter>> Reducer::compression_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  side_.drain_host();  // the communicator's lane writes the counters
  return {strategy_->kind(), strategy_->counters()};
}

std::vector<uint8_t> Reducer::save_compression(StatePart part) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (phase_ != Phase::kIdle)
    fail(gcommInvalidState, "the compression state can only be saved between steps");
  return strategy_->save(part);
}

void Reducer::load_compression(const uint8_t* data, size_t bytes, StateOrigin origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  if (phase_ != Phase::kIdle)
    fail(gcommInvalidState, "the compression state can only be loaded between steps");
  strategy_->load(data, bytes, origin);
}

Sharding& Reducer::sharding(const char* what) const {
  if (sharding_ == nullptr)
    fail(gcommInvalidState, what, " needs a reducer in sharded mode (config.mode = gcommReducerSharded)");
  return *sharding_;
}

std::vector<ShardPiece> Reducer::shard(size_t bucket, gcommTensor_t* wire_shard) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Sharding& sharded = sharding("a shard");
  require(bucket < plan_.buckets.size(), "bucket ", bucket, " is out of range (", plan_.buckets.size(),
          " buckets)");
  if (wire_shard != nullptr) *wire_shard = sharded.shard_of(plan_.buckets[bucket], bucket_data_[bucket]);
  return sharded.pieces(bucket);
}

void Reducer::set_params(const gcommTensor_t* params, size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  Sharding& sharded = sharding("registering parameters");
  if (phase_ != Phase::kIdle) fail(gcommInvalidState, "parameters can only be registered between steps");
  sharded.params().set(params, n, grads_, plan_);
}

void Reducer::all_gather_params(size_t bucket, gcommStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  refuse_in_group("gcommReducerAllGatherParams");
  Sharding& sharded = sharding("gathering parameters");
  if (!sharded.params().registered())
    fail(gcommInvalidState, "no parameters registered: call gcommReducerSetParams first");
  if (phase_ != Phase::kIdle) fail(gcommInvalidState, "parameters can only be gathered between steps");
  require(bucket == GCOMM_ALL_BUCKETS || bucket < plan_.buckets.size(), "bucket ", bucket,
          " is out of range (", plan_.buckets.size(), " buckets)");
  or_fail([&] {
    side_.wait_for(stream);
    if (bucket == GCOMM_ALL_BUCKETS)
      for (size_t b = 0; b < plan_.buckets.size(); ++b) sharded.params().all_gather(b, plan_, sharded);
    else
      sharded.params().all_gather(bucket, plan_, sharded);
    side_.make_wait(stream);
  });
}

std::vector<gcommTensor_t> Reducer::owned_grad_parts() const {
  return sharding_ != nullptr ? sharding_->owned_parts(plan_, grads_) : grads_;
}

const float* Reducer::clip_grad_norm(float max_norm, gcommStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_failed();
  refuse_in_group("gcommReducerClipGradNorm");
  require(max_norm >= 0.0f && std::isfinite(max_norm),
          "max_norm must be 0 (the norm only) or a positive finite "
          "number, not ",
          max_norm);
  if (phase_ != Phase::kIdle || !synced_result_)
    fail(gcommInvalidState,
         "the gradient norm is taken of a synced step's result: call it after the finalize of a "
         "synced step and before the next gcommReducerBeginStep");
  const std::vector<gcommTensor_t> parts = owned_grad_parts();
  const float* norm = nullptr;
  or_fail([&] {
    norm = GradNorm(comm_, *allocator_, side_, *scalars_).clip(parts, sharding_ != nullptr, max_norm, stream);
  });
  return norm;
}

}  // namespace gradcomm::reducer
