// The reducer's own CUDA stream and the events that order it against the
// caller's streams. On the host the side stream is a thread (host_lane.hpp) when
// the reducer asks for one (host ranks with peers): work given to run() goes
// there in order, and every wait for the side stream (make_wait, synchronize)
// waits for that thread; without one, host work runs in the calling thread and
// the waits are no-ops.
#pragma once

#include <functional>
#include <memory>

#include "gradcomm/gradcomm.h"
#include "reducer/host_lane.hpp"

namespace gradcomm::reducer {

class SideStream {
 public:
  // host_thread: on the host, run work on a thread of its own (ignored on a GPU).
  SideStream(gcommDevice_t device, bool host_thread);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // The stream the reducer packs and communicates on (nullptr on the host).
  gcommStream_t stream() const { return stream_; }
  // Runs `work`, which enqueues side-stream work: on a GPU at once (what it
  // enqueues is asynchronous), on the host on the side stream's thread when it
  // has one. Throws an earlier queued work's error (the host thread's).
  void run(std::function<void()> work);
  // Waits for the host thread's queued work (no-op on a GPU or without one),
  // errors aside: for reading what that work writes (statistics) without a
  // device sync; the waits below throw a queued work's error.
  void drain_host() const noexcept;
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
  std::unique_ptr<HostLane> lane_;  // the host's side stream, or null
};

}  // namespace gradcomm::reducer
