#include "comm/flight_recorder.hpp"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/dtype.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/text_file.hpp"

namespace gradcomm::comm {

namespace {
thread_local int t_bucket = -1;

const char* state_name(FlightEntry::State s) {
  switch (s) {
    case FlightEntry::State::kEnqueued:
      return "enqueued";
    case FlightEntry::State::kCompleted:
      return "completed";
    case FlightEntry::State::kFailed:
      return "failed";
  }
  return "?";
}

std::string utc(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hex(uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

int flight_bucket() noexcept {
  return t_bucket;
}
FlightBucketScope::FlightBucketScope(int bucket) noexcept : previous_(t_bucket) {
  t_bucket = bucket;
}
FlightBucketScope::~FlightBucketScope() {
  t_bucket = previous_;
}

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity), ring_(capacity > 0 ? new FlightEntry[capacity] : nullptr) {}

size_t FlightRecorder::capacity_from_env() {
  return static_cast<size_t>(env_int("GRADCOMM_FLIGHT_RECORDER_ENTRIES", 2048, 0, 1 << 20));
}

double FlightRecorder::now_us() const noexcept {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
}

size_t FlightRecorder::enqueued(const CollectiveArgs& a,
                                std::chrono::steady_clock::time_point when) noexcept {
  if (capacity_ == 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t slot = next_;
  FlightEntry& e = ring_[slot];
  e.seq = a.seq;
  e.sig = CallSignature{a.op, a.op == Collective::kBarrier ? 0 : a.count, a.dtype, a.redop, a.root};
  e.stream = reinterpret_cast<uintptr_t>(a.stream);
  e.bucket = t_bucket;
  e.enqueued_us = std::chrono::duration<double, std::micro>(when - start_).count();
  e.state.store(FlightEntry::State::kEnqueued, std::memory_order_relaxed);
  e.completed_us.store(-1, std::memory_order_relaxed);
  next_ = (next_ + 1) % capacity_;
  ++recorded_;
  return slot;
}

void FlightRecorder::done(size_t slot, uint64_t seq, bool p2p, bool ok) noexcept {
  if (capacity_ == 0) return;
  FlightEntry& e = ring_[slot];
  if (e.seq != seq || is_p2p(e.sig.op) != p2p) return;  // overwritten meanwhile
  if (ok) e.completed_us.store(now_us(), std::memory_order_relaxed);
  e.state.store(ok ? FlightEntry::State::kCompleted : FlightEntry::State::kFailed, std::memory_order_release);
}

// The entry of `seq` (of its numbering) if it is still in the ring. Calls
// complete in order, so the newest entries are searched first.
FlightEntry* FlightRecorder::find(uint64_t seq, bool p2p) noexcept {
  const size_t n = capacity_, held = recorded_ < n ? recorded_ : n;
  for (size_t k = 1; k <= held; ++k) {
    FlightEntry& e = ring_[(next_ + n - k) % n];
    if (is_p2p(e.sig.op) != p2p) continue;
    if (e.seq == seq) return &e;
    if (e.seq < seq) return nullptr;
  }
  return nullptr;
}

void FlightRecorder::completed(uint64_t seq, bool p2p) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(seq, p2p)) {
    e->completed_us.store(now_us(), std::memory_order_relaxed);
    e->state.store(FlightEntry::State::kCompleted, std::memory_order_release);
  }
}

void FlightRecorder::completed_at(size_t slot, uint64_t seq, bool p2p) noexcept {
  if (capacity_ == 0 || slot >= capacity_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  FlightEntry& e = ring_[slot];
  if (e.seq != seq || is_p2p(e.sig.op) != p2p) return;  // overwritten meanwhile
  e.completed_us.store(now_us(), std::memory_order_relaxed);
  e.state.store(FlightEntry::State::kCompleted, std::memory_order_release);
}

void FlightRecorder::failed(uint64_t seq, bool p2p) noexcept {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(seq, p2p)) e->state.store(FlightEntry::State::kFailed, std::memory_order_release);
}

void FlightRecorder::note(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  notes_.emplace_back(now_us(), text);
  if (notes_.size() > kMaxNotes) notes_.pop_front();
}

std::string FlightRecorder::to_json(const FlightIdentity& who, const std::string& reason,
                                    const std::string& failure) const {
  using nlohmann::json;
  json entries = json::array();
  json notes = json::array();
  uint64_t last_enqueued = 0, last_completed = 0, recorded = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [at_us, text] : notes_) notes.push_back({{"at_us", at_us}, {"text", text}});
    recorded = recorded_;
    const size_t n = capacity_, held = recorded_ < n ? recorded_ : n;
    for (size_t k = held; k >= 1; --k) {
      const FlightEntry& e = ring_[(next_ + n - k) % n];
      const FlightEntry::State state = e.state.load(std::memory_order_acquire);
      const double completed_us = e.completed_us.load(std::memory_order_relaxed);
      json j = {{"seq", e.seq},
                {"op", collective_name(e.sig.op)},
                {"count", e.sig.count},
                {"dtype", dtype_name(e.sig.dtype)},
                {"bytes", e.sig.count * dtype_size(e.sig.dtype)},
                {"stream", hex(e.stream)},
                {"state", state_name(state)},
                {"enqueued_us", e.enqueued_us},
                {"completed_us", completed_us >= 0 ? json(completed_us) : json()}};
      if (is_reduction(e.sig.op)) j["redop"] = gcommRedOpName(e.sig.redop);
      if (e.sig.op == Collective::kBroadcast || e.sig.op == Collective::kReduce) j["root"] = e.sig.root;
      if (e.bucket >= 0) j["bucket"] = e.bucket;
      const bool p2p = is_p2p(e.sig.op);
      // Sends and receives have numbers of their own ("p2p_seq"): only the two
      // ranks take part, so ranks differ in how many they made.
      if (p2p) {
        j["peer"] = e.sig.root;
        j["p2p_seq"] = e.seq;
        j.erase("seq");
      }
      entries.push_back(std::move(j));
      if (p2p) continue;
      last_enqueued = e.seq;
      if (state == FlightEntry::State::kCompleted) last_completed = e.seq;
    }
  }
  json out = {{"gradcomm_flight_record", 1},
              {"rank", who.rank},
              {"size", who.size},
              {"transport", who.transport},
              {"device", who.device},
              {"host", host_name()},
              {"pid", static_cast<long>(getpid())},
              {"written_utc", utc(std::chrono::system_clock::now())},
              {"recorder_started_utc", utc(start_wall_)},
              {"reason", reason},
              {"failure", failure.empty() ? json() : json(failure)},
              {"capacity", capacity_},
              {"recorded", recorded},
              {"last_enqueued_seq", last_enqueued},
              {"last_completed_seq", last_completed},
              {"notes", std::move(notes)},
              {"entries", std::move(entries)}};
  return out.dump(1);
}

void write_flight_record(const std::string& path, const std::string& json) {
  write_text_file(path, json, "flight record");
}

std::string flight_record_path_from_env(int rank) {
  return rank_file_path("GRADCOMM_FLIGHT_RECORDER_FILE", rank);
}

}  // namespace gradcomm::comm
