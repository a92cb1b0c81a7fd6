// The reducer's own CUDA stream and the events that order it against the
// caller's streams. On the host every call is a no-op: host work runs in order
// in the calling thread.
#pragma once

#include "gradcomm/gradcomm.h"

namespace gradcomm::reducer {

class SideStream {
 public:
  explicit SideStream(gcommDevice_t device);  // creates nothing for the host
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // The stream the reducer packs and communicates on (nullptr on the host).
  gcommStream_t stream() const { return stream_; }
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
};

}  // namespace gradcomm::reducer
