// Test double of EventSource: events complete only when a test says so, which
// makes every interleaving of streams reproducible on the host. Thread-safe, so
// thread tests can complete events while the allocator records them.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "memory/events/event_source.hpp"

namespace gradcomm {
namespace memory {

class ManualEventSource final : public EventSource {
 public:
  Event record(gcommStream_t stream) override;
  bool query(Event event) override;
  // There is nobody to wait for on the host: synchronizing completes the event
  // (as the device eventually would) and counts the wait.
  void synchronize(Event event) override;
  void release(Event event) noexcept override;

  // Completes every event recorded so far on `stream`.
  void complete_stream(gcommStream_t stream);
  void complete_all();
  // Events recorded and not yet released (the cache must not leak them).
  size_t outstanding() const;
  // Not-yet-complete events recorded on `stream`.
  size_t incomplete_on(gcommStream_t stream) const;
  size_t recorded() const;
  size_t synchronizations() const;
  // The newest event recorded so far (0 if none), and the newest completed one
  // recorded on `stream`: a stream "passed" a moment t when
  // last_completed_on(stream) > the last_event() read at t.
  Event last_event() const;
  Event last_completed_on(gcommStream_t stream) const;
  // While set, record() throws gcommCudaError (the failure path of recording).
  void fail_records(bool fail);

 private:
  struct State {
    gcommStream_t stream;
    bool complete;
  };
  mutable std::mutex mutex_;
  void mark_complete(Event event, State& state);

  std::map<Event, State> events_;
  std::map<gcommStream_t, Event> last_completed_;
  Event last_ = 0;
  size_t recorded_ = 0;
  size_t synchronizations_ = 0;
  bool fail_records_ = false;
};

}  // namespace memory
}  // namespace gradcomm
