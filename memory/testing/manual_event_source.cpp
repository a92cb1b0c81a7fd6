#include "memory/testing/manual_event_source.hpp"

#include "common/error.hpp"

namespace gradcomm {
namespace memory {

Event ManualEventSource::record(gcommStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fail_records_) fail(gcommCudaError, "ManualEventSource: injected record failure");
  events_[++last_] = State{stream, false};
  ++recorded_;
  return last_;
}

bool ManualEventSource::query(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(event);
  if (it == events_.end()) fail(gcommInternalError, "ManualEventSource: query of unknown event ", event);
  return it->second.complete;
}

void ManualEventSource::synchronize(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(event);
  if (it == events_.end()) fail(gcommInternalError, "ManualEventSource: sync of unknown event ", event);
  mark_complete(it->first, it->second);
  ++synchronizations_;
}

void ManualEventSource::release(Event event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.erase(event);
}

void ManualEventSource::complete_stream(gcommStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& kv : events_)
    if (kv.second.stream == stream) mark_complete(kv.first, kv.second);
}

void ManualEventSource::complete_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& kv : events_) mark_complete(kv.first, kv.second);
}

size_t ManualEventSource::outstanding() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

size_t ManualEventSource::incomplete_on(gcommStream_t stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& kv : events_) n += (kv.second.stream == stream && !kv.second.complete) ? 1 : 0;
  return n;
}

size_t ManualEventSource::recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

size_t ManualEventSource::synchronizations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return synchronizations_;
}

void ManualEventSource::mark_complete(Event event, State& state) {
  state.complete = true;
  Event& last = last_completed_[state.stream];
  if (event > last) last = event;
}

Event ManualEventSource::last_event() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_;
}

Event ManualEventSource::last_completed_on(gcommStream_t stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = last_completed_.find(stream);
  return it == last_completed_.end() ? 0 : it->second;
}

void ManualEventSource::fail_records(bool fail_now) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_records_ = fail_now;
}

}  // namespace memory
}  // namespace gradcomm
