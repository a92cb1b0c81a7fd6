// The step trace: measured reducer steps as Chrome trace events (the JSON
// "traceEvents" format that chrome://tracing and Perfetto open). One process per
// rank, two tracks: the caller (bucket-ready marks, backward's end, the scaler's
// update) and the reducer's side stream (pack, collectives, epilogues, PowerSGD's
// phases). Times are the host's steady clock in microseconds, so the files of the
// ranks of one machine line up; those of several machines line up once shifted by
// their "clock_offset_us" (straggler attribution's estimate of this clock minus
// rank 0's; tools/gradcomm_trace_plot.py does it). A GPU's spans are placed from
// the step's begin stamp (docs/observability.md). The events are kept in memory, a bounded number
// of steps, and written at once as one valid JSON document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reducer/step_timeline.hpp"

namespace gradcomm::reducer {

class ChromeTrace final : public StepSink {
 public:
  // Checks at once that `path` can be written (throws gcommInvalidArgument naming it).
  ChromeTrace(std::string path, int rank, int size, std::string device, uint64_t first_step, uint64_t steps);

  bool wants(uint64_t step) const noexcept override { return step >= first_ && step - first_ < steps_; }
  bool complete(uint64_t measured_up_to) const noexcept override {
    return measured_up_to >= first_ + steps_ - 1;
  }
  void add(const MeasuredStep& step) override;
  // Writes the whole trace (throws naming the path when it cannot).
  void write() const override;
  std::string describe() const override;
  void set_clock_offset(double us) noexcept override { clock_offset_us_ = us; }

 private:
  std::string path_;
  int rank_;
  uint64_t first_, steps_;
  uint64_t added_ = 0;
  double clock_offset_us_ = 0;       // written with the events; tools/gradcomm_trace_plot.py applies it
  std::vector<std::string> events_;  // each one JSON object (the library stays out of this header)
};

// A trace path for `rank`: %r, %h, %p filled in; in a job of several ranks a
// pattern without %r gets ".rank%r" before its extension (trace.json ->
// trace.rank1.json), so that the ranks do not overwrite one another's file.
std::string per_rank_path(const std::string& pattern, int rank, int size);

constexpr uint64_t kMaxTraceSteps = 100000;

}  // namespace gradcomm::reducer
