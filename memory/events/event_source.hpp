// Stream ordering, abstracted. The cache only needs to know "has this stream
// passed the point where I marked it?", so it talks to an EventSource instead of
// CUDA. CUDA objects use pooled cudaEvent_t; host objects use ImmediateEvents
// (host work is synchronous: every point is passed at once); tests use
// ManualEventSource and complete events by hand, which lets the whole
// cross-stream logic run and be tested without a GPU.
#pragma once

#include <cstdint>
#include <memory>

#include "gradcomm/types.h"

namespace gradcomm {
namespace memory {

// An opaque event handle (0 is never a valid event).
using Event = uint64_t;

class EventSource {
 public:
  virtual ~EventSource() = default;
  // Marks the current end of `stream`. May throw (e.g. a CUDA error).
  virtual Event record(gcommStream_t stream) = 0;
  // True once the stream has passed the mark. Never blocks.
  virtual bool query(Event event) = 0;
  // Blocks until the stream has passed the mark (used only by the OOM path,
  // release-cached and destroy, whose contracts say they may wait).
  virtual void synchronize(Event event) = 0;
  // Gives the event back (pooled). Never throws.
  virtual void release(Event event) noexcept = 0;
};

// For host memory: every event is complete when recorded.
class ImmediateEvents final : public EventSource {
 public:
  Event record(gcommStream_t) override { return ++last_; }
  bool query(Event) override { return true; }
  void synchronize(Event) override {}
  void release(Event) noexcept override {}

 private:
  Event last_ = 0;
};

// Pooled cudaEvent_t (cudaEventDisableTiming) of CUDA device `ordinal`; every
// CUDA call holds a DeviceGuard for it.
std::unique_ptr<EventSource> make_cuda_event_source(int ordinal);

}  // namespace memory
}  // namespace gradcomm
