// The host's side stream: one thread that runs the reducer's queued work in
// order. With it a host rank's bucket collectives overlap the backward pass that
// goes on marking gradients, as the CUDA side stream's do on a GPU (and as gloo's
// worker threads do for torch's DDP); without it every bucket's all-reduce ran
// inside the mark-ready call that completed the bucket, stalling backward.
//
// The first error of queued work is kept for good: what was queued after it is
// skipped, and every later push or drain throws it (the reducer, failing on the
// first, takes no further step).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gradcomm::reducer {

class HostLane {
 public:
  HostLane();
  ~HostLane();  // waits for the queue, then joins
  HostLane(const HostLane&) = delete;
  HostLane& operator=(const HostLane&) = delete;

  // Queues `work` after what is queued; throws a queued work's error first.
  // The queue keeps its capacity, so a steady step allocates nothing here.
  void push(std::function<void()> work);
  // Returns once everything queued has run; throws the kept error. From the
  // lane's own thread (queued work draining itself) it returns at once.
  void drain();
  // The same wait without the error: for readers of what the work wrote.
  void wait_idle() noexcept;

 private:
  void loop();
  void throw_error();  // with mutex_ held

  std::mutex mutex_;
  std::condition_variable work_, idle_;
  std::vector<std::function<void()>> queue_;
  size_t head_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace gradcomm::reducer
