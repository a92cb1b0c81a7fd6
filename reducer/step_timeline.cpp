#include "reducer/step_timeline.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "common/device.hpp"
#include "common/log.hpp"

namespace gradcomm::reducer {

namespace {

double now_us() noexcept {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

cudaEvent_t as_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}

}  // namespace

StepTiming timing_of(uint64_t step, double step_us, double backward_us,
                     const std::vector<MeasuredSpan>& spans) {
  StepTiming t;
  t.step = step;
  t.step_us = step_us;
  t.backward_us = backward_us;
  for (const MeasuredSpan& s : spans) {
    if (s.kind != SpanKind::kComm || s.instant) continue;
    const double duration = std::max(0.0, s.end_us - s.begin_us);
    t.comm_us += duration;
    t.overlapped_comm_us += std::clamp(backward_us - s.begin_us, 0.0, duration);
  }
  return t;
}

uint64_t TimingBudget::stride_for(double cost_us, double step_us) const noexcept {
  const double allowance = std::max(fraction * std::max(step_us, 0.0), floor_us);
  if (!(cost_us > allowance)) return 1;  // within budget (a NaN cost too: nothing to pace by)
  if (!(allowance > 0)) return kMaxStride;
  const double stride = std::ceil(cost_us / allowance);
  return stride >= static_cast<double>(kMaxStride) ? kMaxStride : static_cast<uint64_t>(stride);
}

StepTimeline::StepTimeline(gcommDevice_t device, bool enabled, TimingBudget budget)
    : cuda_(device.kind == gcommDeviceCuda), ordinal_(device.ordinal), budget_(budget), enabled_(enabled) {}

StepTimeline::~StepTimeline() {
  if (!cuda_) return;
  try {
    DeviceGuard guard(ordinal_);
    for (Record& r : records_)
      for (void* e : r.events) (void)cudaEventDestroy(as_event(e));
  } catch (const std::exception& e) {
    GCOMM_WARN("reducer step timing: ", e.what(), "; its CUDA events are left to the context");
  }
}

void StepTimeline::begin_step(uint64_t step, gcommStream_t side) {
  abandon();  // a step that ended without end_step or abandon (it threw before either)
  // Earlier steps first, so that a trace whose last step is in gets written now
  // even when this step is not timed.
  poll(false);
  const bool traced = trace_ != nullptr && trace_->wants(step);
  if (!traced && (!enabled_ || step < next_measured_)) return;
  Record* slot = nullptr;
  for (Record& r : records_)
    if (r.state == Record::State::kFree) slot = &r;
  if (slot == nullptr) {
    // Both earlier steps are still running on the GPU: the older one is dropped.
    slot = records_[0].step < records_[1].step ? &records_[0] : &records_[1];
    ++dropped_;
    GCOMM_TRACE(REDUCER, "step timing: step ", slot->step, " was still running when step ", step,
                " began; it is not measured");
  }
  Record& r = *slot;
  r.state = Record::State::kOpen;
  r.broken = false;
  r.step = step;
  r.spans.clear();
  r.events_used = 0;
  r.last_mark_us = -1;
  r.cost_us = 0;
  r.backward = r.end = Stamp{};
  current_ = &r;
  r.begin = stamp(r, side);
}

StepTimeline::Stamp StepTimeline::stamp(Record& r, gcommStream_t stream) noexcept {
  const Stamp s = stamp_unmetered(r, stream);
  r.cost_us += now_us() - s.host_us;  // the clock read itself included: the host's whole stamp
  return s;
}

StepTimeline::Stamp StepTimeline::stamp_unmetered(Record& r, gcommStream_t stream) noexcept {
  Stamp s;
  s.host_us = now_us();
  if (!cuda_ || r.broken) return s;
  // Timing never fails a step: any failure here (the device guard, an event, the
  // pool's growth) only leaves this step unmeasured.
  try {
    DeviceGuard guard(ordinal_);
    if (r.events_used == r.events.size()) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) {
        (void)cudaGetLastError();
        r.broken = true;
        GCOMM_WARN("reducer step timing: cudaEventCreate failed; step ", r.step, " is not measured");
        return s;
      }
      r.events.push_back(e);
    }
    if (cudaEventRecord(as_event(r.events[r.events_used]), static_cast<cudaStream_t>(stream)) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      r.broken = true;
      GCOMM_WARN("reducer step timing: cudaEventRecord failed; step ", r.step, " is not measured");
      return s;
    }
  } catch (const std::exception& e) {
    r.broken = true;
    GCOMM_WARN("reducer step timing: ", e.what(), "; step ", r.step, " is not measured");
    return s;
  }
  s.event = static_cast<int>(r.events_used++);
  return s;
}

void StepTimeline::marked() noexcept {
  std::lock_guard<std::mutex> lock(stamps_);
  if (current_ != nullptr) current_->last_mark_us = now_us();
}

void StepTimeline::instant(const char* name, int bucket) noexcept {
  std::lock_guard<std::mutex> lock(stamps_);
  if (current_ == nullptr) return;
  Stamp at;
  at.host_us = now_us();
  try {
    current_->spans.push_back(RawSpan{name, SpanKind::kCompute, Track::kCaller, bucket, true, at, at});
  } catch (const std::bad_alloc&) {
    current_->broken = true;
  }
}

size_t StepTimeline::open(const char* name, SpanKind kind, Track track, int bucket,
                          gcommStream_t stream) noexcept {
  std::lock_guard<std::mutex> lock(stamps_);
  if (current_ == nullptr) return 0;
  Record& r = *current_;
  const Stamp begin = stamp(r, stream);
  try {
    r.spans.push_back(RawSpan{name, kind, track, bucket, false, begin, begin});
  } catch (const std::bad_alloc&) {
    r.broken = true;
    return SIZE_MAX;  // close() ignores it
  }
  return r.spans.size() - 1;
}

void StepTimeline::close(size_t span, gcommStream_t stream) noexcept {
  std::lock_guard<std::mutex> lock(stamps_);
  if (current_ == nullptr || span >= current_->spans.size()) return;
  current_->spans[span].end = stamp(*current_, stream);
}

void StepTimeline::backward_done(gcommStream_t stream) noexcept {
  std::lock_guard<std::mutex> lock(stamps_);
  if (current_ == nullptr || current_->backward.host_us >= 0) return;  // the first call stamps
  Record& r = *current_;
  if (cuda_) {
    r.backward = stamp(r, stream);
  } else {
    r.backward.host_us = r.last_mark_us >= 0 ? r.last_mark_us : now_us();
  }
}

void StepTimeline::end_step(gcommStream_t stream) {
  if (current_ == nullptr) return;
  current_->end = stamp(*current_, stream);
  current_->state = Record::State::kPending;
  current_ = nullptr;
  if (!cuda_) poll(false);
}

void StepTimeline::abandon() noexcept {
  if (current_ == nullptr) return;
  current_->state = Record::State::kFree;
  current_ = nullptr;
}

bool StepTimeline::measure(Record& r, bool wait, MeasuredStep* out) noexcept {
  if (r.broken) return false;
  auto time_of = [&](const Stamp& s, double* us) -> bool {
    if (s.event < 0) {
      *us = s.host_us - r.begin.host_us;
      return true;
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, as_event(r.events[static_cast<size_t>(r.begin.event)]),
                             as_event(r.events[static_cast<size_t>(s.event)])) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    *us = static_cast<double>(ms) * 1000.0;
    return true;
  };
  std::optional<DeviceGuard> guard;
  try {
    if (cuda_) {
      guard.emplace(ordinal_);
      if (r.end.event < 0 || r.begin.event < 0) return false;
      cudaEvent_t last = as_event(r.events[static_cast<size_t>(r.end.event)]);
      const cudaError_t done = wait ? cudaEventSynchronize(last) : cudaEventQuery(last);
      if (done == cudaErrorNotReady) return false;
      if (done != cudaSuccess) {
        (void)cudaGetLastError();
        r.broken = true;
        return false;
      }
    }
    out->spans.clear();
    out->spans.reserve(r.spans.size());
  } catch (const std::exception&) {
    r.broken = true;
    return false;
  }
  out->begin_host_us = r.begin.host_us;
  double step_us = 0, backward_us = 0;
  bool ok = time_of(r.end, &step_us) && time_of(r.backward, &backward_us);
  for (const RawSpan& s : r.spans) {
    MeasuredSpan m{s.name, s.kind, s.track, s.bucket, s.instant, 0, 0};
    ok = ok && time_of(s.begin, &m.begin_us) && time_of(s.end, &m.end_us);
    out->spans.push_back(m);  // capacity reserved above
  }
  if (!ok) {
    r.broken = true;
    return false;
  }
  out->timing = timing_of(r.step, step_us, backward_us, out->spans);
  return true;
}

void StepTimeline::poll(bool wait) {
  // Oldest first, so the trace receives steps in order.
  Record* order[2] = {&records_[0], &records_[1]};
  if (order[1]->step < order[0]->step) std::swap(order[0], order[1]);
  MeasuredStep m;
  for (Record* r : order) {
    if (r->state != Record::State::kPending) continue;
    const double began = now_us();
    if (measure(*r, wait, &m)) {
      r->state = Record::State::kFree;
      // Reading the events back is part of the step's cost; on the host, measuring
      // is arithmetic (and a wait here would be the GPU's, not timing's).
      pace(r->step, r->cost_us + (cuda_ && !wait ? now_us() - began : 0.0), m.timing.step_us);
      take(m);
    } else if (r->broken) {
      r->state = Record::State::kFree;  // a failed stamp: this step is lost, the next ones are not
    }
  }
}

void StepTimeline::pace(uint64_t step, double cost_us, double step_us) {
  const uint64_t stride = budget_.stride_for(cost_us, step_us);
  if (stride != stride_)
    GCOMM_INFO(REDUCER, "step timing: measuring ",
               stride == 1 ? std::string("every step") : "one step in " + std::to_string(stride), " (step ",
               step, " took ", step_us, " us; timing it cost ", cost_us, " us, budget ",
               budget_.fraction * 100, "% or ", budget_.floor_us, " us)");
  stride_ = stride;
  next_measured_ = step + stride;
}

void StepTimeline::take(const MeasuredStep& m) {
  last_ = m.timing;
  ++measured_;
  GCOMM_TRACE(REDUCER, "step ", m.timing.step, " timing: ", m.timing.step_us, " us, backward ",
              m.timing.backward_us, " us, communication ", m.timing.comm_us, " us of which ",
              m.timing.overlapped_comm_us, " us overlapped backward (",
              static_cast<int>(m.timing.overlap() * 100 + 0.5), "%)");
  if (trace_ == nullptr) return;
  try {
    if (trace_->wants(m.timing.step)) trace_->add(m);
  } catch (const std::bad_alloc&) {
    GCOMM_WARN("reducer step trace: out of host memory at step ", m.timing.step, "; the trace is dropped");
    trace_.reset();
    return;
  }
  if (!trace_->complete(m.timing.step)) return;
  std::unique_ptr<StepSink> done = std::move(trace_);
  try {
    done->write();
    GCOMM_INFO(REDUCER, done->describe());
  } catch (const std::exception& e) {
    GCOMM_WARN("reducer step trace: ", e.what());
  }
}

void StepTimeline::set_clock_offset(double us) noexcept {
  clock_offset_us_ = us;
  if (trace_ != nullptr) trace_->set_clock_offset(us);
}

void StepTimeline::start_trace(std::unique_ptr<StepSink> trace) {
  if (trace_ != nullptr) stop_trace();
  trace_ = std::move(trace);
  trace_->set_clock_offset(clock_offset_us_);
}

void StepTimeline::stop_trace() {
  if (trace_ == nullptr) return;
  poll(true);
  if (trace_ == nullptr) return;  // its last step came in just now and it was written
  std::unique_ptr<StepSink> done = std::move(trace_);
  done->write();
  GCOMM_INFO(REDUCER, done->describe());
}

}  // namespace gradcomm::reducer
