// A host communicator's lane: one thread that runs queued work in order. The
// reducers of a host communicator queue their buckets' work here (pack,
// collective, epilogue), so the collectives overlap the backward pass that goes
// on marking gradients, as a GPU reducer's side stream does (and gloo's worker
// threads for torch's DDP). One lane per communicator, whatever the number of
// reducers on it, and Communicator::collective called from any other thread
// waits for the lane first: every collective is still issued in program order,
// one at a time, as when the reducers ran them inline.
//
// Errors are the submitter's: each keeps the first error of its queued work
// (Errors); its work queued after that is skipped, and every later push or
// drain of that submitter throws it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gradcomm::comm {

class HostLane {
 public:
  // One submitter's first error (read and written under the lane's lock).
  struct Errors {
    std::exception_ptr first;
  };

  // log_rank: the rank the lane's log lines carry.
  explicit HostLane(int log_rank);
  ~HostLane();  // waits for the queue, then joins
  HostLane(const HostLane&) = delete;
  HostLane& operator=(const HostLane&) = delete;

  // Queues `work` for `errors`' submitter after everything queued; throws that
  // submitter's kept error first. The queue keeps its capacity: a steady step
  // allocates nothing here.
  void push(std::function<void()> work, Errors& errors);
  // Returns once everything queued (by anyone) has run; throws `errors`' kept
  // error. From the lane's own thread it returns at once.
  void drain(Errors& errors);
  // The same wait, without an error: for readers of what the work wrote.
  void wait_idle() noexcept;
  bool on_lane_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct Item {
    std::function<void()> work;
    Errors* errors;
  };
  void loop(int log_rank);

  std::mutex mutex_;
  std::condition_variable work_, idle_;
  std::vector<Item> queue_;
  size_t head_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace gradcomm::comm
