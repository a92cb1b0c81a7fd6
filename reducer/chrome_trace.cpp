#include "reducer/chrome_trace.hpp"

#include <unistd.h>

#include <limits>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/text_file.hpp"

#include <nlohmann/json.hpp>

namespace gradcomm::reducer {

namespace {

constexpr int kCallerTid = 1;
constexpr int kReducerTid = 2;

int tid_of(Track t) {
  return t == Track::kCaller ? kCallerTid : kReducerTid;
}

nlohmann::json name_event(const char* what, int pid, int tid, const std::string& name) {
  nlohmann::json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

std::string per_rank_path(const std::string& pattern, int rank, int size) {
  std::string p = pattern;
  bool has_rank = false;  // a %r placeholder, not the escaped "%%r"
  for (size_t i = 0; i + 1 < p.size(); ++i)
    if (p[i] == '%') {
      has_rank = has_rank || p[i + 1] == 'r';
      ++i;
    }
  if (size > 1 && !has_rank) {
    // Several ranks, one name: each rank's file gets its rank before the extension.
    const size_t slash = p.rfind('/');
    const size_t dot = p.rfind('.');
    const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
    p.insert(has_ext ? dot : p.size(), ".rank%r");
  }
  return resolve_log_path(p, host_name(), static_cast<long>(getpid()), rank);
}

ChromeTrace::ChromeTrace(std::string path, int rank, int size, std::string device, uint64_t first_step,
                         uint64_t steps)
    : path_(std::move(path)), rank_(rank), first_(first_step), steps_(steps) {
  require(steps >= 1 && steps <= kMaxTraceSteps, "a trace takes 1 to ", kMaxTraceSteps, " steps, not ",
          steps);
  require(first_step >= 1, "the first traced step is 1 or later, not ", first_step);
  // An unwritable path is reported now, not after the steps it was meant to hold.
  check_writable(path_, "step trace");
  const nlohmann::json names[] = {
      name_event("process_name", rank, -1, cat("rank ", rank, " of ", size, " (", device, ")")),
      {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}},
      name_event("thread_name", rank, kCallerTid, "caller: backward, finalize"),
      name_event("thread_name", rank, kReducerTid, "reducer stream: buckets")};
  for (const nlohmann::json& e : names) events_.push_back(e.dump());
}

void ChromeTrace::add(const MeasuredStep& step) {
  const StepTiming& t = step.timing;
  const double base = step.begin_host_us;
  const nlohmann::json step_event = {{"name", cat("step ", t.step)},
                                     {"cat", "step"},
                                     {"ph", "X"},
                                     {"ts", base},
                                     {"dur", t.step_us},
                                     {"pid", rank_},
                                     {"tid", kCallerTid},
                                     {"args",
                                      {{"step", t.step},
                                       {"backward_us", t.backward_us},
                                       {"comm_us", t.comm_us},
                                       {"overlapped_comm_us", t.overlapped_comm_us},
                                       {"overlap", t.overlap()}}}};
  const nlohmann::json backward_event = {
      {"name", "backward"},   {"cat", "step"}, {"ph", "X"},         {"ts", base},
      {"dur", t.backward_us}, {"pid", rank_},  {"tid", kCallerTid}, {"args", {{"step", t.step}}}};
  events_.push_back(step_event.dump());
  events_.push_back(backward_event.dump());
  for (const MeasuredSpan& s : step.spans) {
    nlohmann::json e = {{"name", s.name},
                        {"cat", s.instant ? "mark" : s.kind == SpanKind::kComm ? "comm" : "compute"},
                        {"ts", base + s.begin_us},
                        {"pid", rank_},
                        {"tid", tid_of(s.track)},
                        {"args", {{"step", t.step}, {"bucket", s.bucket}}}};
    if (s.instant) {
      e["ph"] = "i";
      e["s"] = "t";
    } else {
      e["ph"] = "X";
      e["dur"] = s.end_us - s.begin_us;
    }
    events_.push_back(e.dump());
  }
  ++added_;
}

std::string ChromeTrace::describe() const {
  return cat("step trace of ", added_, " steps written to ", path_);
}

void ChromeTrace::write() const {
  const nlohmann::json other = {{"gradcomm_trace", 1},
                                {"host", host_name()},
                                {"pid", static_cast<long>(getpid())},
                                {"rank", rank_},
                                {"first_step", first_},
                                {"steps_requested", steps_},
                                {"steps", added_},
                                {"clock", "host steady clock, microseconds"},
                                {"clock_offset_us", clock_offset_us_}};
  // One event per line: a file people can also read and grep.
  std::string text =
      "{\"displayTimeUnit\": \"ms\", \"otherData\": " + other.dump() + ",\n\"traceEvents\": [\n";
  for (size_t k = 0; k < events_.size(); ++k) text += events_[k] + (k + 1 < events_.size() ? ",\n" : "\n");
  text += "]}";
  write_text_file(path_, text, "step trace");
}

}  // namespace gradcomm::reducer
