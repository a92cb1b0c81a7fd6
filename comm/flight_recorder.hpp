// The flight recorder: every communicator keeps its last collectives in a ring
// (GRADCOMM_FLIGHT_RECORDER_ENTRIES, default 2048; 0 turns it off; ~100 bytes an
// entry), each with what every rank must agree on, the stream, the reducer bucket
// it served, and when it was enqueued and completed. Written as JSON on a failure
// (timeout, abort, a peer's failure) when GRADCOMM_FLIGHT_RECORDER_FILE names a
// path (%h host, %p pid, %r rank, as GRADCOMM_DEBUG_FILE), and on demand
// (gcommCommDumpFlightRecord / gcommCommGetFlightRecord). tools/gradcomm_desync.py
// reads the ranks' files and says which rank stopped where.
//
// Completion: host transports finish a call before returning; CUDA calls complete
// when the watchdog sees their event (so "completed" lags by up to its 20 ms poll,
// and nothing on the hot path waits for the GPU).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/transport.hpp"

namespace gradcomm::comm {

// The reducer bucket the calls of this thread serve (-1: none), set around a
// bucket's collectives (FlightBucketScope).
int flight_bucket() noexcept;
class FlightBucketScope {
 public:
  explicit FlightBucketScope(int bucket) noexcept;
  ~FlightBucketScope();
  FlightBucketScope(const FlightBucketScope&) = delete;
  FlightBucketScope& operator=(const FlightBucketScope&) = delete;

 private:
  int previous_;
};

struct FlightEntry {
  enum class State : uint8_t { kEnqueued, kCompleted, kFailed };
  // Written under the recorder's mutex by the rank's thread.
  uint64_t seq = 0;
  CallSignature sig;
  uintptr_t stream = 0;
  int bucket = -1;
  double enqueued_us = 0;  // since the recorder started
  // Also written without the mutex by the rank's thread when a host call returns
  // (the hot path takes one lock, not two); read under it.
  std::atomic<State> state{State::kEnqueued};
  std::atomic<double> completed_us{-1};  // -1: not (yet) seen complete
};

// Where a rank stands, for the record's header.
struct FlightIdentity {
  int rank = 0;
  int size = 1;
  std::string transport;
  std::string device;
};

class FlightRecorder {
 public:
  // capacity 0: records nothing.
  explicit FlightRecorder(size_t capacity);
  static size_t capacity_from_env();

  bool enabled() const noexcept { return capacity_ > 0; }
  // Records a call made at `when`; returns its slot for done() (by the same thread).
  size_t enqueued(const CollectiveArgs& a, std::chrono::steady_clock::time_point when) noexcept;
  // The call in `slot` (seq `seq` of its numbering) returned: completed (host transports) or failed.
  void done(size_t slot, uint64_t seq, bool p2p, bool ok) noexcept;
  // A CUDA call seen complete by the watchdog, or a host send/receive run at its
  // group's end (any thread; searched by seq among collectives, or among sends
  // and receives when `p2p`: the two are numbered apart).
  void completed(uint64_t seq, bool p2p) noexcept;
  // The same for a call whose slot is known (the watchdog's ungrouped calls): no
  // search. The search walks back from the newest entry, up to the whole ring, under
  // the lock every call takes, once per retired call. On an H100 a tight loop of
  // out-of-place NCCL calls took 18 us each with the recorder on and 8 us with it
  // off; the search is the suspected cause, not a measured one.
  void completed_at(size_t slot, uint64_t seq, bool p2p) noexcept;
  // A grouped call whose launch failed at the group's end (searched likewise).
  void failed(uint64_t seq, bool p2p) noexcept;

  // An event beside the calls (a membership's new generation: who left or joined
  // and why), kept with its time; the last kMaxNotes are in the record's "notes".
  static constexpr size_t kMaxNotes = 64;
  void note(const std::string& text);

  // The record as JSON text: identity, why it was written, the failure (if any)
  // and the entries oldest first.
  std::string to_json(const FlightIdentity& who, const std::string& reason, const std::string& failure) const;

 private:
  FlightEntry* find(uint64_t seq, bool p2p) noexcept;  // under mutex_
  double now_us() const noexcept;

  mutable std::mutex mutex_;
  std::deque<std::pair<double, std::string>> notes_;  // (us since start, text), under mutex_
  const size_t capacity_;
  std::unique_ptr<FlightEntry[]> ring_;
  size_t next_ = 0;        // slot of the next entry
  uint64_t recorded_ = 0;  // entries ever recorded
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const std::chrono::system_clock::time_point start_wall_ = std::chrono::system_clock::now();
};

// Writes `json` to `path` (created or truncated); throws gcommInvalidArgument naming
// the path when it cannot be written.
void write_flight_record(const std::string& path, const std::string& json);
// GRADCOMM_FLIGHT_RECORDER_FILE with the placeholders filled in for `rank`; "" if unset.
std::string flight_record_path_from_env(int rank);

}  // namespace gradcomm::comm
