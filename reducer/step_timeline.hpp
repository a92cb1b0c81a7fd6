// Step timing: what each synced step's reducer work cost, how much of its
// communication ran while backward was still producing gradients (the overlap),
// and the spans a Chrome trace is drawn from (chrome_trace.hpp).
//
// Host communicators stamp with the host's steady clock, so a step is measured
// when finalize returns. CUDA ones record events on the stream the work runs on
// and read them once the step's last event has completed: queried at the next
// begin and on request, never waited for on the hot path (two steps are kept;
// a step still running when its slot is needed again is dropped, not waited for).
//
// Its cost is paced, not switched off: each measured step's own cost (its stamps:
// on a GPU a CUDA event record each, 0.3–1 µs, three spans a bucket; and reading
// them back) is held to TimingBudget — a fraction of the step, or a floor — by
// measuring one step in `stride`, the stride set from the last measured step's
// cost and length. Host steps stay well inside it (a clock read a stamp); a GPU
// step of 60 buckets and short GPU work would otherwise pay +16–23% (H100).
//
// Off, every call is one branch (recording() false). The reducer calls it under
// its mutex, except the spans of a host reducer's bucket work, which its side
// thread stamps while the caller marks gradients: the stamps of a step in
// progress (marked, instant, open, close, backward_done) take stamps_ for that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gradcomm/types.h"

namespace gradcomm::reducer {

enum class SpanKind : uint8_t { kCompute, kComm };
// Where a span runs: the caller's thread and stream (mark-ready calls, the
// scaler's update) or the reducer's side stream (every bucket's work).
enum class Track : uint8_t { kCaller, kReducer };

struct StepTiming {
  uint64_t step = 0;  // 0: none measured
  double step_us = 0, backward_us = 0, comm_us = 0, overlapped_comm_us = 0;
  double overlap() const { return comm_us > 0 ? overlapped_comm_us / comm_us : 0.0; }
};

// What a measured step's timing may cost: `fraction` of the step, or `floor_us`,
// whichever is more (the floor keeps short steps with a few stamps measured every
// time). Past it, one step in stride is measured.
struct TimingBudget {
  double fraction = 0.005;
  double floor_us = 5.0;
  static constexpr uint64_t kMaxStride = 1000;
  // The stride that keeps `cost_us` a measured step within budget over `step_us`.
  uint64_t stride_for(double cost_us, double step_us) const noexcept;
};

// One span of a measured step, in microseconds from the step's begin (an instant
// has begin == end).
struct MeasuredSpan {
  const char* name;
  SpanKind kind;
  Track track;
  int bucket;  // -1: the whole step
  bool instant;
  double begin_us, end_us;
};

struct MeasuredStep {
  StepTiming timing;
  double begin_host_us = 0;  // the step's begin on the host's steady clock (the trace's time base)
  std::vector<MeasuredSpan> spans;
};

// Where measured steps go besides the timing figures: the step trace
// (chrome_trace.hpp) is one; the timeline knows no format.
class StepSink {
 public:
  virtual ~StepSink() = default;
  virtual bool wants(uint64_t step) const noexcept = 0;
  // Every wanted step was added (or can no longer come): the sink is written then.
  virtual bool complete(uint64_t measured_up_to) const noexcept = 0;
  virtual void add(const MeasuredStep& step) = 0;
  // Writes what was added (throws naming where, when it cannot).
  virtual void write() const = 0;
  virtual std::string describe() const = 0;  // "step trace of 3 steps written to /tmp/t.json"
  // This rank's steady clock minus rank 0's (straggler attribution's estimate):
  // a sink that puts ranks on one clock keeps it.
  virtual void set_clock_offset(double /*us*/) noexcept {}
};

// Overlap of a step: each communication span's part before `backward_us`.
StepTiming timing_of(uint64_t step, double step_us, double backward_us,
                     const std::vector<MeasuredSpan>& spans);

class StepTimeline {
 public:
  StepTimeline(gcommDevice_t device, bool enabled, TimingBudget budget = {});
  ~StepTimeline();
  StepTimeline(const StepTimeline&) = delete;
  StepTimeline& operator=(const StepTimeline&) = delete;

  bool enabled() const noexcept { return enabled_; }
  // Turned on, the next step is measured (its cost sets the stride again).
  void set_enabled(bool on) noexcept {
    if (on && !enabled_) next_measured_ = 0;
    enabled_ = on;
  }
  // From begin_step to end_step of a measured step.
  bool recording() const noexcept { return current_ != nullptr; }

  // A synced step begins; `side`: the reducer's stream (its begin stamp).
  void begin_step(uint64_t step, gcommStream_t side);
  void marked() noexcept;                               // a mark-ready call (host clock)
  void instant(const char* name, int bucket) noexcept;  // host clock, caller's track
  size_t open(const char* name, SpanKind kind, Track track, int bucket, gcommStream_t stream) noexcept;
  void close(size_t span, gcommStream_t stream) noexcept;
  // Backward has ended: called at the mark that completes the gradients (when every
  // mark of the step was on that stream, which then holds them all) and again at
  // finalize; the first call stamps. Host: the last mark's time. GPU: here on
  // `stream`; a stamp at finalize would also count the host time of the launches
  // made at the last mark (a local transport's rendezvous) as backward (seen on the H100).
  void backward_done(gcommStream_t stream) noexcept;
  // Finalize's work is enqueued on `stream`; host steps are measured at once.
  void end_step(gcommStream_t stream);
  // A step that failed is not measured.
  void abandon() noexcept;

  // Measures the steps whose work is complete (wait: blocks for the GPU's), feeds
  // the trace, and writes the trace once its last step is in.
  void poll(bool wait);
  StepTiming last() const { return last_; }
  uint64_t measured_steps() const { return measured_; }
  // One synced step in stride() is measured (1: every one); traced steps always are.
  uint64_t stride() const noexcept { return stride_; }

  // The trace takes `steps` synced steps from `first_step` on; it replaces one
  // that was running (written first).
  void start_trace(std::unique_ptr<StepSink> trace);
  bool tracing() const noexcept { return trace_ != nullptr; }
  // Writes the trace with what is measured so far and ends it; throws when the
  // file cannot be written.
  void stop_trace();
  // Passed to the trace running now and to later ones (StepSink::set_clock_offset).
  void set_clock_offset(double us) noexcept;

 private:
  struct Stamp {
    double host_us = -1;
    int event = -1;  // index into the record's CUDA events; -1: the host time is the stamp
  };
  struct RawSpan {
    const char* name;
    SpanKind kind;
    Track track;
    int bucket;
    bool instant;
    Stamp begin, end;
  };
  struct Record {
    enum class State { kFree, kOpen, kPending } state = State::kFree;
    bool broken = false;  // a CUDA call failed while stamping: not measured
    uint64_t step = 0;
    Stamp begin, backward, end;  // backward.host_us < 0: not stamped yet
    double last_mark_us = -1;
    std::vector<RawSpan> spans;
    std::vector<void*> events;  // cudaEvent_t, made on first use and kept
    size_t events_used = 0;
    double cost_us = 0;  // host time spent stamping this step (and, once measured, reading it)
  };

  // Stamps `stream`'s position (the host clock, and on a GPU an event), adding what
  // it cost the host to r.cost_us.
  Stamp stamp(Record& r, gcommStream_t stream) noexcept;
  Stamp stamp_unmetered(Record& r, gcommStream_t stream) noexcept;
  // Times from the record's begin; false if its events are not complete (or failed).
  bool measure(Record& r, bool wait, MeasuredStep* out) noexcept;
  void take(const MeasuredStep& m);
  // The stride after a measured step that cost `cost_us`.
  void pace(uint64_t step, double cost_us, double step_us);

  const bool cuda_;
  const int ordinal_;
  const TimingBudget budget_;
  bool enabled_;
  uint64_t stride_ = 1;
  uint64_t next_measured_ = 0;  // the first synced step measured again (when enabled)
  std::mutex stamps_;
  Record records_[2];
  Record* current_ = nullptr;
  StepTiming last_;
  uint64_t measured_ = 0;
  uint64_t dropped_ = 0;
  std::unique_ptr<StepSink> trace_;
  double clock_offset_us_ = 0;
};

// RAII: a span around work enqueued on `stream` (nothing when not recording).
class TimedSpan {
 public:
  TimedSpan(StepTimeline& timeline, const char* name, SpanKind kind, int bucket, gcommStream_t stream,
            Track track = Track::kReducer) noexcept
      : timeline_(timeline.recording() ? &timeline : nullptr), stream_(stream) {
    if (timeline_ != nullptr) span_ = timeline_->open(name, kind, track, bucket, stream);
  }
  ~TimedSpan() {
    if (timeline_ != nullptr) timeline_->close(span_, stream_);
  }
  TimedSpan(const TimedSpan&) = delete;
  TimedSpan& operator=(const TimedSpan&) = delete;

 private:
  StepTimeline* timeline_;
  gcommStream_t stream_;
  size_t span_ = 0;
};

}  // namespace gradcomm::reducer
