#include "comm/communicator.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

#include "comm/group.hpp"
#include "comm/nccl/nccl_version.hpp"
#include "comm/transports.hpp"
#include "common/cuda_check.hpp"
#include "common/deadline.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/env.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {
bool is_cuda(const gcommDevice_t& d) {
  return d.kind == gcommDeviceCuda;
}
}  // namespace

Communicator::Communicator(std::unique_ptr<Transport> transport, double timeout_s)
    : transport_(std::move(transport)),
      timeout_s_(timeout_s),
      check_every_call_(env_int("GRADCOMM_CHECK_POINTERS", 0, 0, 1) == 1) {
  if (is_cuda(transport_->device())) watchdog_ = std::thread([this] { watchdog_loop(); });
  GCOMM_INFO(INIT, "communicator created: rank ", rank(), " of ", size(), ", ", transport_name(),
             " transport on ", describe_device(device()),
             transport_->kind() == gcommTransportNccl
                 ? cat(", NCCL ", nccl_version_string(nccl_loaded_version()))
                 : std::string());
}

const char* Communicator::transport_name() const noexcept {
  const TransportEntry* t = find_transport(transport_->kind());
  return t != nullptr ? t->name : "?";
}

Communicator::~Communicator() {
  lane_ptr_.store(nullptr);
  lane_.reset();  // its queue is empty once the reducers are gone
  if (log_enabled(LogLevel::kInfo, LogSub::INIT)) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_line(LogLevel::kInfo, LogSub::INIT,
             cat("communicator destroyed: rank ", rank(), " of ", size(), ", ", transport_name(),
                 " transport, after ", next_seq_ - 1, " collective(s)",
                 failure_ != gcommSuccess ? cat(" (failed: ", failure_message_, ")") : ""));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (is_cuda(device())) {
    DeviceGuard guard(device());
    for (auto& p : pending_) GCOMM_CUDA_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(p.event)));
    for (void* e : spare_events_) GCOMM_CUDA_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(e)));
  }
}

void Communicator::validate(const CollectiveArgs& a) const {
  require(static_cast<int>(a.redop) >= 0 && static_cast<int>(a.redop) < gcommNumRedOps, "op ",
          static_cast<int>(a.redop), " is not a gcommRedOp_t (gcommSum, gcommAvg, gcommMax, gcommMin)");
  if (a.op == Collective::kBarrier) return;
  checked_dtype(a.dtype, "dtype");
  if (is_p2p(a.op)) {
    validate_p2p(a);
    return;
  }
  if (a.op == Collective::kBroadcast || a.op == Collective::kReduce)
    require(a.root >= 0 && a.root < size(), "root ", a.root, " is not a rank (0..", size() - 1, ")");
  // All-gather's receive, reduce-scatter's send and both of all-to-all's buffers hold size() blocks.
  const bool all_to_all = a.op == Collective::kAllToAll;
  const bool blocked = a.op == Collective::kAllGather || a.op == Collective::kReduceScatter || all_to_all;
  if (blocked)
    require(a.count <= SIZE_MAX / static_cast<size_t>(size()), "count ", a.count, " times ", size(),
            " ranks overflows");
  const size_t blocks = blocked ? a.count * size() : a.count;
  const size_t send_count = a.op == Collective::kReduceScatter || all_to_all ? blocks : a.count;
  const size_t recv_count = a.op == Collective::kAllGather || all_to_all ? blocks : a.count;
  checked_bytes(std::max(send_count, recv_count), a.dtype, "count");
  if (a.count == 0) return;
  bool needs_send = a.op != Collective::kBroadcast || rank() == a.root;
  bool needs_recv = a.op != Collective::kReduce || rank() == a.root;
  // Both buffers are checked against the address limit before anything reads
  // them: an absurd count must be refused, not followed into unmapped memory.
  if (needs_send) {
    require(a.send != nullptr, "sendbuf is NULL but count is ", a.count);
    checked_span(a.send, send_count, a.dtype, "sendbuf");
    if (!a.buffers_known) check_buffer(a.send, send_count * dtype_size(a.dtype), "sendbuf");
  }
  if (needs_recv) {
    require(a.recv != nullptr, "recvbuf is NULL but count is ", a.count);
    checked_span(a.recv, recv_count, a.dtype, "recvbuf");
    // In place, the send check has answered already (one driver query fewer).
    if (!a.buffers_known && !(needs_send && a.recv == a.send))
      check_buffer(a.recv, recv_count * dtype_size(a.dtype), "recvbuf");
  }
  if (all_to_all) {
    // Each rank writes its block q while block q of its own input may still be
    // on its way to rank q: the buffers must be apart (NCCL has no in-place
    // all-to-all). Both spans passed the address-limit checks above.
    const auto s = reinterpret_cast<uintptr_t>(a.send), r = reinterpret_cast<uintptr_t>(a.recv);
    const size_t span = blocks * dtype_size(a.dtype);
    require(
        s + span <= r || r + span <= s, "sendbuf and recvbuf overlap at count ", a.count, ": each holds ",
        size(), " blocks of count elements (", span, " bytes) and they start ", s > r ? s - r : r - s,
        " bytes apart; count is the elements of one block, and all-to-all has no in-place variant (give it "
        "two separate buffers of count x ",
        size(), " elements)");
  }
}

void Communicator::validate_p2p(const CollectiveArgs& a) const {
  const bool send = a.op == Collective::kSend;
  require(a.root >= 0 && a.root < size(), "peer ", a.root, " is not a rank (0..", size() - 1, ")");
  // Outside a group a send returns once received: to itself, it never would.
  require(a.root != rank() || in_group(),
          send ? "a send to this rank itself" : "a receive from this rank itself",
          " completes only with its ", send ? "receive" : "send", " in the same group (gcommGroupStart/End)");
  checked_bytes(a.count, a.dtype, "count");
  if (a.count == 0) return;
  const void* buffer = send ? a.send : a.recv;
  const char* name = send ? "sendbuf" : "recvbuf";
  require(buffer != nullptr, name, " is NULL but count is ", a.count);
  checked_span(buffer, a.count, a.dtype, name);
  if (!a.buffers_known) check_buffer(buffer, a.count * dtype_size(a.dtype), name);
}

void Communicator::check_buffer(const void* ptr, size_t bytes, const char* what) const {
  if (!is_cuda(device())) {
    require_usable(pointer_info(ptr), device(), what, -1, "the communicator is on");
    return;
  }
  if (!check_every_call_ && known_.covers(ptr, bytes)) return;
  const PointerRange r = pointer_range(ptr);
  require_usable(r.info, device(), what, -1, "the communicator is on");
  // Remembered only when the whole span lies in the allocation (checked_span has
  // ruled out a wrap past the address limit).
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (r.contains(p) && bytes <= r.end - p) known_.add(r.begin, r.end);
}

void Communicator::record_failure(gcommStatus_t status, const std::string& message) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ != gcommSuccess) return;
    failure_ = status;
    failure_message_ = message;
  } catch (...) {
  }
  GCOMM_WARN("communicator rank ", rank(), " failed: ", message);
  // The first failure writes the flight record where GRADCOMM_FLIGHT_RECORDER_FILE says.
  try {
    const std::string path = flight_record_path_from_env(rank());
    if (path.empty() || !recorder_.enabled()) return;
    write_flight_record(path, flight_record(cat("failure: ", status_name(status))));
    GCOMM_WARN("communicator rank ", rank(), ": flight record written to ", path);
  } catch (const std::exception& e) {
    try {  // the warning allocates too: nothing may leave this noexcept function
      GCOMM_WARN("communicator rank ", rank(), ": the flight record could not be written: ", e.what());
    } catch (...) {
    }
  } catch (...) {
  }
}

std::string Communicator::flight_record(const std::string& reason) const {
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ != gcommSuccess) failure = cat(status_name(failure_), ": ", failure_message_);
  }
  return recorder_.to_json(FlightIdentity{rank(), size(), transport_name(), describe_device(device())},
                           reason, failure);
}

void Communicator::dump_flight_record(const std::string& path) const {
  require(recorder_.enabled(), "the flight recorder is off (GRADCOMM_FLIGHT_RECORDER_ENTRIES=0)");
  const std::string where = path.empty() ? flight_record_path_from_env(rank()) : path;
  require(!where.empty(), "no path: pass one, or set GRADCOMM_FLIGHT_RECORDER_FILE (%r is the rank)");
  write_flight_record(where, flight_record("requested"));
}

void Communicator::throw_failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  fail(failure_, "the communicator has failed and only accepts destroy: ", failure_message_);
}

void* Communicator::take_event() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spare_events_.empty()) {
      void* e = spare_events_.back();
      spare_events_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  GCOMM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

HostLane* Communicator::host_lane() {
  if (is_cuda(device()) || size() < 2 || !transport_->other_threads_may_call()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (lane_ == nullptr) {
    lane_ = std::make_unique<HostLane>(rank());
    lane_ptr_.store(lane_.get());
  }
  return lane_.get();
}

struct Communicator::CallerClaim {
  Communicator* comm;  // null: this thread already held it (a nested call), nothing to release
  ~CallerClaim() {
    if (comm != nullptr) comm->caller_.store(std::thread::id{}, std::memory_order_release);
  }
};

Communicator::CallerClaim Communicator::claim_for_this_thread() {
  const std::thread::id me = std::this_thread::get_id();
  std::thread::id inside{};
  if (caller_.compare_exchange_strong(inside, me, std::memory_order_acquire)) return CallerClaim{this};
  if (inside == me) return CallerClaim{nullptr};
  const std::string why =
      cat("rank ", rank(),
          ": a collective was called while another thread was inside one on the same "
          "communicator; a communicator takes one thread at a time (as NCCL's), and the ranks' calls can no "
          "longer be paired, so it is failed on every rank. Give each thread its own communicator, or "
          "serialize the calls in the same order on every rank");
  record_failure(gcommInvalidState, why);
  transport_->abort();
  cv_.notify_all();
  fail(gcommInvalidState, why);
}

void Communicator::collective(CollectiveArgs a) {
  // Program order: a call from outside the lane comes after the reducers'
  // queued collectives, never between or beside them.
  if (HostLane* lane = lane_ptr_.load(); lane != nullptr && !lane->on_lane_thread()) lane->wait_idle();
  const CallerClaim claim = claim_for_this_thread();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_ != gcommSuccess) {
      fail(failure_, "the communicator has failed and only accepts destroy: ", failure_message_);
    }
  }
  // Log lines of this thread carry this rank (local ranks are threads of one process).
  set_thread_log_rank(rank());
  validate(a);
  a.seq = is_p2p(a.op) ? next_p2p_seq_++ : next_seq_++;
  const auto started = std::chrono::steady_clock::now();
  const size_t slot = recorder_.enqueued(a, started);
  std::optional<DeviceGuard> guard;
  if (is_cuda(device())) guard.emplace(device());
  if (in_group()) transport_->join_group();  // a transport's own group opens before its call
  try {
    transport_->run(a);
  } catch (...) {  // whatever was thrown: a half-run call leaves the ranks out of step
    const Error e = as_error(std::current_exception());
    recorder_.done(slot, a.seq, is_p2p(a.op), false);
    // Argument mismatches between ranks leave the communicator usable; anything
    // else (timeout, abort, a peer's failure, CUDA/NCCL errors) fails it.
    if (e.status() == gcommInvalidArgument) throw;
    // The host transports name the call themselves when it timed out here: say it
    // once. When a peer failed first, the message is the peer's: this rank's call is
    // named in front, in the failure record and in what the caller reads.
    std::string name = cat(call_id(a));
    const std::string& m = e.message();
    std::string named = m.compare(0, name.size(), name) == 0 ? m : cat(name, ": ", m);
    record_failure(e.status(), named);
    throw Error(e.status(), std::move(named));
  }
  // Host: completed, except a send or receive kept for the group's end (it
  // completes there: complete_grouped). CUDA: when the watchdog sees its event.
  const bool kept_for_group_end = in_group() && is_p2p(a.op);
  if (!is_cuda(device()) && !kept_for_group_end) recorder_.done(slot, a.seq, is_p2p(a.op), true);
  // One line per call: host transports have completed it, CUDA ones enqueued it.
  GCOMM_TRACE(
      COLL, call_id(a),
      a.op == Collective::kBarrier
          ? std::string()
          : cat(" (", dtype_name(a.dtype), is_reduction(a.op) ? cat(", ", gcommRedOpName(a.redop)) : "", ")"),
      " ", is_cuda(device()) ? "enqueued" : "completed", " in ",
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count(), " us",
      in_group() ? " (in a group)" : "");
  if (in_group()) {
    // Launched at the group's end: watched from then on (see comm/group.hpp).
    ++grouped_;
    try {
      add_to_group(this, a);
    } catch (...) {
      --grouped_;
      throw;
    }
    return;
  }
  watch(a, slot);
}

// On the collective's device (the caller holds a DeviceGuard).
void Communicator::watch(const CollectiveArgs& a, size_t slot) {
  if (!is_cuda(device())) return;
  void* event = take_event();
  GCOMM_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(event), reinterpret_cast<cudaStream_t>(a.stream)));
  auto deadline = deadline_after(timeout_s_);
  // The watchdog is not woken: it looks every 20 ms, which bounds how late a
  // timeout is noticed, and waking it per call cost tight loops of small
  // collectives tens of microseconds.
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(Pending{event, deadline, call_id(a), slot});
}

void Communicator::complete_grouped(const CollectiveArgs& a) {
  if (!is_cuda(device())) {
    if (is_p2p(a.op)) recorder_.completed(a.seq, true);  // run at the group's end (comm/p2p_group.hpp)
    return;
  }
  DeviceGuard guard(device());
  watch(a);
}

void Communicator::fail_grouped(const CollectiveArgs& a, gcommStatus_t status,
                                const std::string& message) noexcept {
  recorder_.failed(a.seq, is_p2p(a.op));
  try {
    record_failure(status, cat(call_id(a), " (in a group): ", message));
  } catch (...) {
    record_failure(status, message);
  }
  transport_->abort();
  cv_.notify_all();
}

void Communicator::watchdog_loop() {
  set_thread_log_rank(rank());  // its warnings carry the rank (and go to the rank's log file)
  DeviceGuard guard(device());
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    // Retire completed collectives, in order. CUDA and NCCL are queried without
    // the lock, so the issuing thread never waits for them; only this thread
    // pops the queue, so the front stays put meanwhile.
    while (!pending_.empty()) {
      auto front = static_cast<cudaEvent_t>(pending_.front().event);
      lock.unlock();
      cudaError_t q = cudaEventQuery(front);
      lock.lock();
      if (q == cudaErrorNotReady) break;
      if (q != cudaSuccess) {
        (void)cudaGetLastError();
        std::string msg =
            cat(pending_.front().what(), ": ", cudaGetErrorName(q), " (", cudaGetErrorString(q), ")");
        lock.unlock();
        record_failure(gcommCudaError, msg);
        transport_->abort();
        lock.lock();
      }
      if (q == cudaSuccess) {
        const Pending& p = pending_.front();
        if (p.slot != kNoSlot)
          recorder_.completed_at(p.slot, p.id.seq, is_p2p(p.id.op));
        else
          recorder_.completed(p.id.seq, is_p2p(p.id.op));
      }
      spare_events_.push_back(pending_.front().event);
      pending_.pop_front();
    }
    std::string async_message;
    lock.unlock();
    gcommStatus_t async = transport_->poll_async_error(async_message);
    lock.lock();
    bool late = !pending_.empty() && std::chrono::steady_clock::now() > pending_.front().deadline &&
                failure_ == gcommSuccess;
    if (async != gcommSuccess || late) {
      std::string msg = late ? cat(pending_.front().what(), " did not complete within ", timeout_s_,
                                   " s; the communicator was aborted")
                             : async_message;
      lock.unlock();
      record_failure(late ? gcommTimeout : async, msg);
      transport_->abort();
      lock.lock();
    }
  }
}

void Communicator::abort() noexcept {
  record_failure(gcommAborted, cat("rank ", rank(), " was aborted by its owner (gcommCommAbort)"));
  transport_->abort();
  cv_.notify_all();
}

gcommStatus_t Communicator::health(std::string& message) noexcept {
  std::string async_message;
  gcommStatus_t async = transport_->poll_async_error(async_message);
  if (async != gcommSuccess) record_failure(async, async_message);
  std::lock_guard<std::mutex> lock(mutex_);
  message = failure_message_;
  return failure_;
}

void Communicator::synchronize() {
  // Grouped calls launch at the group's end: waiting before it would return
  // with them not even started.
  if (int grouped = grouped_.load(); grouped > 0)
    fail(gcommInvalidState, "the communicator has ", grouped,
         " collective(s) in a group not yet ended; call gcommGroupEnd first");
  auto deadline = deadline_after(timeout_s_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!pending_.empty() && failure_ == gcommSuccess) {
    if (std::chrono::steady_clock::now() > deadline) break;
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  if (failure_ != gcommSuccess) {
    lock.unlock();
    throw_failure();
  }
  // The watchdog turns an overdue collective into a failure; report it as such here too.
  if (!pending_.empty()) {
    std::string what = pending_.front().what();
    lock.unlock();
    fail(gcommTimeout, what, " did not complete within ", timeout_s_, " s");
  }
}

}  // namespace gradcomm::comm
