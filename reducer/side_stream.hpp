// The reducer's own CUDA stream and the events that order it against the
// caller's streams. On the host the side stream is the communicator's lane
// (comm/host_lane.hpp) when the reducer is given one: work given to run() goes
// there in order, and every wait for the side stream (make_wait, synchronize)
// waits for the lane and throws what this reducer's queued work threw; without
// a lane, host work runs in the calling thread and the waits are no-ops.
#pragma once

#include <functional>

#include "comm/host_lane.hpp"
#include "gradcomm/types.h"

namespace gradcomm::reducer {

class SideStream {
 public:
  // lane: on the host, where run() queues work (null: the calling thread; not
  // used on a GPU). It must outlive the side stream.
  SideStream(gcommDevice_t device, comm::HostLane* lane);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // The stream the reducer packs and communicates on (nullptr on the host).
  gcommStream_t stream() const { return stream_; }
  // Runs `work`, which enqueues side-stream work: on a GPU at once (what it
  // enqueues is asynchronous), on the host on the lane when there is one.
  // Throws an earlier queued work's error.
  void run(std::function<void()> work);
  // Waits for the lane's queued work (no-op on a GPU or without a lane), errors
  // aside: for reading what that work writes (statistics) without a device
  // sync; the waits below throw a queued work's error.
  void drain_host() const noexcept;
  // Teardown's wait: on a GPU synchronize(); on the host the lane's work, its
  // errors left to the step that queued it (they were thrown there, or are now moot).
  void quiesce();
  // Work enqueued on the side stream from now on waits for what is enqueued on `other` so far.
  void wait_for(gcommStream_t other);
  // Work enqueued on `other` from now on waits for what is enqueued on the side stream so far.
  void make_wait(gcommStream_t other);
  // Records the point `other` has reached (say, the end of an epilogue that reads
  // the side stream's buffers); the next wait_for_marked() orders the side stream
  // after it. An event, not the stream, is kept: the caller may destroy its stream.
  void mark(gcommStream_t other);
  void wait_for_marked();
  // Blocks until the side stream is idle.
  void synchronize();
  // Blocks until `other` is idle (reading a flag on request).
  void synchronize(gcommStream_t other);

 private:
  bool cuda_ = false;
  int ordinal_ = -1;
  gcommStream_t stream_ = nullptr;
  void* to_side_ = nullptr;    // cudaEvent_t: caller -> side
  void* from_side_ = nullptr;  // cudaEvent_t: side -> caller
  void* marked_ = nullptr;     // cudaEvent_t: mark()
  bool mark_pending_ = false;
  comm::HostLane* lane_ = nullptr;  // the host's side stream, or null
  comm::HostLane::Errors errors_;   // this reducer's queued work's
};

}  // namespace gradcomm::reducer
