// The Communicator: what every transport shares. It validates each call before
// anything is enqueued, numbers the calls, keeps the health state (healthy, or
// failed with the status and message of the first failure), and, for CUDA
// transports, runs a watchdog that aborts the transport when an enqueued
// collective does not complete within the timeout or the transport reports an
// asynchronous error. After a failure every call returns that failure.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/flight_recorder.hpp"
#include "comm/host_lane.hpp"
#include "comm/known_buffers.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

class Communicator {
 public:
  Communicator(std::unique_ptr<Transport> transport, double timeout_s);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  gcommDevice_t device() const { return transport_->device(); }
  gcommTransport_t kind() const { return transport_->kind(); }
  double timeout_s() const { return timeout_s_; }
  Transport& transport() { return *transport_; }

  // Validates, then runs (host) or enqueues (CUDA) the collective. Throws the
  // failure state if the communicator already failed; records a failure of the
  // transport into it (the first one wins). A call while another thread is inside
  // one fails the communicator (gcommInvalidState, naming the misuse) and aborts
  // its transport: the ranks' calls can no longer be paired, so every rank fails
  // rather than one taking a sum of other threads' calls.
  void collective(CollectiveArgs args);

  // The lane of a host communicator with peers whose transport other threads may
  // call (comm/host_lane.hpp), made on first use; null for the others. A
  // collective called from any thread but the lane's first waits for it.
  HostLane* host_lane();

  // Fails the communicator with gcommAborted and aborts the transport.
  void abort() noexcept;
  // gcommSuccess, or the failure (message filled). Polls the transport too.
  gcommStatus_t health(std::string& message) noexcept;
  // Waits (bounded by the timeout) for every enqueued collective to complete.
  void synchronize();

  // The flight record as JSON (comm/flight_recorder.hpp); `reason` says why it is written.
  std::string flight_record(const std::string& reason) const;
  // Adds an event to the flight record (FlightRecorder::note).
  void note_in_flight_record(const std::string& text) { recorder_.note(text); }
  // Writes it to `path` ("" : GRADCOMM_FLIGHT_RECORDER_FILE; refused when neither).
  void dump_flight_record(const std::string& path) const;

  // Calls made inside a group (comm/group.hpp) and not yet launched; destroy
  // and synchronize refuse while there are any. The group's end completes or
  // fails each call, then counts it out (left_group).
  int grouped_calls() const noexcept { return grouped_.load(); }
  // At the group's end: the call was launched, watch it from now on.
  void complete_grouped(const CollectiveArgs& args);
  // At the group's end: the launch failed; fail and abort this communicator.
  void fail_grouped(const CollectiveArgs& args, gcommStatus_t status, const std::string& message) noexcept;
  void left_group() noexcept { --grouped_; }

 private:
  const char* transport_name() const noexcept;  // the transport table's name ("nccl")
  static constexpr size_t kNoSlot = SIZE_MAX;
  struct Pending {
    void* event;  // cudaEvent_t
    std::chrono::steady_clock::time_point deadline;
    CallId id;              // the call's name, formatted only for a message
    size_t slot = kNoSlot;  // its flight-recorder slot, where known (not grouped calls)
    std::string what() const { return cat(id); }
  };
  // Claims the communicator for this thread's call (released by the returned
  // guard); a second thread fails it (see collective).
  struct CallerClaim;
  CallerClaim claim_for_this_thread();
  void validate(const CollectiveArgs& a) const;
  void validate_p2p(const CollectiveArgs& a) const;
  // Throws unless `bytes` from `ptr` are memory this communicator's device can use:
  // on a GPU asked of the driver once per allocation (known_), on the host every call.
  void check_buffer(const void* ptr, size_t bytes, const char* what) const;
  void record_failure(gcommStatus_t status, const std::string& message) noexcept;
  [[noreturn]] void throw_failure() const;
  void watchdog_loop();
  void* take_event();
  // CUDA: records the call's completion event for the watchdog.
  void watch(const CollectiveArgs& a, size_t slot = kNoSlot);

  std::unique_ptr<Transport> transport_;
  const double timeout_s_;
  FlightRecorder recorder_{FlightRecorder::capacity_from_env()};
  // Allocations seen usable; touched only inside a claimed call (one thread).
  mutable KnownBuffers known_;
  const bool check_every_call_;  // GRADCOMM_CHECK_POINTERS=1: known_ is not used
  uint64_t next_seq_ = 1;        // collectives
  uint64_t next_p2p_seq_ = 1;    // sends and receives (comm/transport.hpp: CollectiveArgs::seq)
  std::atomic<int> grouped_{0};
  std::atomic<std::thread::id> caller_{};     // the thread inside collective(), if any
  std::unique_ptr<HostLane> lane_;            // made under mutex_, once
  std::atomic<HostLane*> lane_ptr_{nullptr};  // read without it

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  gcommStatus_t failure_ = gcommSuccess;
  std::string failure_message_;
  std::deque<Pending> pending_;
  std::vector<void*> spare_events_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace gradcomm::comm
