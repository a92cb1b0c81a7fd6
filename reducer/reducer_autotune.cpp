// The reducer's part of the bucket autotune (bucket_autotune.hpp has the model):
// when it runs, what it measures, and the rebuild to the chosen cap.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "common/device.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "memory/device_bytes.hpp"
#include "reducer/reducer.hpp"

namespace gradcomm::reducer {

namespace {

// The measured steps are synced steps 2..1+kAutotuneMeasuredSteps: the first
// one warms up and rebuilds the plan in the ready order.
constexpr uint64_t kFirstMeasuredStep = 2;
constexpr uint64_t kChoosingStep = kFirstMeasuredStep + kAutotuneMeasuredSteps - 1;

bool default_caps(const ReducerOptions& o) {
  const gcommReducerConfig_t defaults = GCOMM_REDUCER_CONFIG_INITIALIZER;
  return o.bucket_cap_bytes == defaults.bucket_cap_bytes &&
         o.first_bucket_bytes == defaults.first_bucket_bytes;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// A refused creation allocates nothing: called first thing in the constructor.
void Reducer::refuse_bad_autotune() const {
  if (options_.bucket_autotune != gcommBucketAutotuneOn) return;
  // A host clock at each mark is when the gradient exists on the host; on a GPU
  // it is when its kernel was enqueued, which says nothing of its arrival.
  require(device_.kind == gcommDeviceHost,
          "bucket_autotune = gcommBucketAutotuneOn measures when gradients are marked ready on the host "
          "clock; on ",
          describe_device(device_),
          " a mark is when the gradient's kernel was enqueued, not done: set bucket_cap_bytes instead");
  require(!options_.grad_as_bucket_view,
          "bucket_autotune with grad_as_bucket_view: the caller holds addresses into the first plan");
  require(!options_.sharded,
          "bucket_autotune in sharded mode: the optimizer's shards are laid out by the first plan");
}

// Whether this rank could measure; agree_settings makes rank 0's decision everyone's.
bool Reducer::autotune_possible() const {
  return device_.kind == gcommDeviceHost && !options_.grad_as_bucket_view && !options_.sharded;
}

void Reducer::start_autotune() {
  autotune_.bucket_cap_bytes = bucket_cap_bytes_;
  autotune_.first_bucket_bytes = first_bucket_bytes_;
  autotune_.configured_cap_bytes = options_.bucket_cap_bytes;
  const bool on = options_.bucket_autotune == gcommBucketAutotuneOn ||
                  (options_.bucket_autotune == gcommBucketAutotuneAuto && autotune_possible() &&
                   options_.settings.bucket_autotune.value_or(default_caps(options_)));
  if (on) measure_or_skip();
}

void Reducer::measure_or_skip() {
  autotune_.state = gcommBucketAutotuneStateMeasuring;
  arrivals_ = std::make_unique<ArrivalRecorder>(grads_.size());
  if (comm_.size() < 2) return skip_autotune("one rank: nothing crosses a link");
  if (bucket_payload_bytes_ < kAutotuneMinBytes)
    return skip_autotune(cat("the gradients' ", bucket_payload_bytes_, " wire bytes are below ",
                             kAutotuneMinBytes, ": one or two buckets whatever the cap"));
}

void Reducer::adopt_autotune(bool on) {
  GCOMM_INFO(REDUCER, "reducer: bucket autotune ", on ? "on" : "off",
             " as on rank 0 (this rank's config and ", "GRADCOMM_REDUCER_BUCKET_AUTOTUNE said ",
             on ? "off" : "on", ")");
  if (!on) {
    arrivals_.reset();
    autotune_.state = gcommBucketAutotuneStateOff;
  } else if (autotune_possible() && strategy_->kind() == gcommCompressionNone) {
    measure_or_skip();
  } else {
    // Rank 0 will probe at step 4, so this rank must issue the same collectives;
    // with no arrivals its measurements say "none", and every rank then skips.
    arrivals_ = std::make_unique<ArrivalRecorder>(grads_.size());
    autotune_.state = gcommBucketAutotuneStateMeasuring;
  }
}

void Reducer::skip_autotune(const std::string& why) {
  arrivals_.reset();
  recording_arrivals_ = false;
  autotune_.state = gcommBucketAutotuneStateSkipped;
  GCOMM_INFO(REDUCER, "reducer: bucket autotune skipped (", why, "); the bucket cap stays ",
             bucket_cap_bytes_, " bytes");
}

void Reducer::autotune_begin_step() {
  const uint64_t step = stats_.synced_steps + 1;
  recording_arrivals_ = arrivals_ != nullptr && step >= kFirstMeasuredStep && step <= kChoosingStep;
  if (recording_arrivals_) arrivals_->begin_step(last_step_end_us_);
}

void Reducer::autotune_mark(size_t index) {
  arrivals_->mark(index, now_us());
}

void Reducer::autotune_end_step() {
  if (recording_arrivals_) arrivals_->end_step();
  recording_arrivals_ = false;
  if (arrivals_ != nullptr && stats_.synced_steps == kChoosingStep) choose_bucket_cap();
  last_step_end_us_ = now_us();  // every rank is here once the step's last collective is done
}

std::vector<size_t> Reducer::plan_order() const {
  std::vector<size_t> order;
  for (const Bucket& bucket : plan_.buckets)
    for (const BucketEntry& e : bucket.entries) order.push_back(e.grad);
  return order;
}

// Timed in-place all-reduces of zeros on the communicator, every rank at once.
LinkModel Reducer::probe_link() {
  const ProbeSizes sizes = probe_sizes(bucket_payload_bytes_);
  std::unique_ptr<void, std::function<void(void*)>> hold(
      allocator_->allocate(sizes.large_bytes, side_.stream()), [this](void* p) {
        try {
          allocator_->deallocate(p, side_.stream());
        } catch (const std::exception& e) {
          GCOMM_WARN("reducer: freeing the bucket autotune's probe: ", e.what());
        }
      });
  void* buffer = hold.get();
  memory::zero_bytes(buffer, sizes.large_bytes, device_, side_.stream());
  side_.synchronize();
  auto timed = [&](size_t bytes) {
    const double start = now_us();
    comm_.collective(comm::owned_buffers_call(comm::Collective::kAllReduce, buffer, buffer,
                                              bytes / sizeof(float), gcommFloat32, side_.stream(), gcommSum,
                                              /*root=*/0));
    side_.synchronize();
    return now_us() - start;
  };
  timed(sizeof(float));  // every rank leaves it together: the timed calls start aligned
  const double tiny = std::min(timed(sizeof(float)), timed(sizeof(float)));
  const double small = std::min(timed(sizes.small_bytes), timed(sizes.small_bytes));
  const double large = std::min(timed(sizes.large_bytes), timed(sizes.large_bytes));
  return fit_link(tiny, sizes.small_bytes, small, sizes.large_bytes, large);
}

// Synced step kChoosingStep's finalize, on every rank: the probe, every rank's
// measurements all-gathered and combined, the same choice everywhere, the rebuild.
void Reducer::choose_bucket_cap() {
  const std::unique_ptr<ArrivalRecorder> arrivals = std::move(arrivals_);
  const size_t n = grads_.size();
  const LinkModel own_link = probe_link();
  const std::vector<double> own_arrival =
      arrivals->complete_steps() > 0 ? arrivals->median_arrival_us() : std::vector<double>();
  const std::vector<float> mine = pack_measurement(own_link, own_arrival, n);
  std::vector<float> all(mine.size() * static_cast<size_t>(comm_.size()));
  control_collective(comm::Collective::kAllGather, mine.data(), mine.size() * sizeof(float), all.data(),
                     "the bucket autotune's measurements");
  const CombinedMeasurement measured = combine_measurements(all, comm_.size(), n);
  if (measured.incomplete_rank >= 0)
    return skip_autotune(cat("rank ", measured.incomplete_rank,
                             " left gradients unmarked in every measured step (synced steps ",
                             kFirstMeasuredStep, "-", kChoosingStep, ")"));
  const std::vector<size_t> order = plan_order();
  auto plan_with = [&](size_t cap) {
    PlanOptions po = plan_options();
    po.order = order;
    po.bucket_cap_bytes = cap;
    po.first_bucket_bytes = std::min(options_.first_bucket_bytes, cap);
    return plan_buckets(specs_, po);
  };
  const std::vector<size_t> caps = candidate_caps(options_.bucket_cap_bytes);
  std::vector<double> predicted;
  for (size_t cap : caps)
    predicted.push_back(predict_finish_us(plan_with(cap), measured.arrival_us, measured.link));
  const double first_arrival = *std::min_element(measured.arrival_us.begin(), measured.arrival_us.end());
  const size_t k = choose_cap(caps, predicted, first_arrival);
  autotune_.chosen_at_step = stats_.synced_steps;
  const size_t configured =
      static_cast<size_t>(std::find(caps.begin(), caps.end(), options_.bucket_cap_bytes) - caps.begin());
  bucket_cap_bytes_ = caps[k];
  first_bucket_bytes_ = std::min(options_.first_bucket_bytes, caps[k]);
  autotune_.state = gcommBucketAutotuneStateChosen;
  autotune_.bucket_cap_bytes = bucket_cap_bytes_;
  autotune_.first_bucket_bytes = first_bucket_bytes_;
  autotune_.link_alpha_us = own_link.alpha_us;
  autotune_.link_bytes_per_s = own_link.us_per_byte > 0 ? 1e6 / own_link.us_per_byte : 0;
  autotune_.backward_us = *std::max_element(own_arrival.begin(), own_arrival.end()) -
                          *std::min_element(own_arrival.begin(), own_arrival.end());
  autotune_.predicted_us = predicted[k];
  autotune_.predicted_configured_us = predicted[configured];
  std::string table;
  for (size_t j = 0; j < caps.size(); ++j)
    table += cat(j == 0 ? "" : ", ", caps[j] >> 10, " KiB ", static_cast<long long>(predicted[j]), " us");
  const BucketPlan plan = plan_with(bucket_cap_bytes_);
  const bool changed = !same_plan(plan, plan_);
  if (changed) lay_out_buckets(plan, *strategy_);
  GCOMM_INFO(REDUCER, "reducer: bucket autotune chose ", bucket_cap_bytes_, " bytes (first bucket ",
             first_bucket_bytes_, "; configured ", options_.bucket_cap_bytes, ") at synced step ",
             stats_.synced_steps, ": the slowest link ", measured.link.alpha_us, " us a call + ",
             measured.link.us_per_byte > 0 ? 1 / measured.link.us_per_byte : 0.0, " MB/s, the last gradient ",
             *std::max_element(measured.arrival_us.begin(), measured.arrival_us.end()),
             " us after the last step's end on the latest rank; predicted end of the last bucket per cap: ",
             table, changed ? "\n" + describe_plan(plan_) : std::string("; the plan is unchanged"));
}

gcommBucketAutotuneReport_t Reducer::bucket_autotune() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return autotune_;
}

}  // namespace gradcomm::reducer
