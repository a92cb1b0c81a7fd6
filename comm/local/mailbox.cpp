#include "comm/local/mailbox.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

struct Mailbox::Letter {
  // kRefused: the receive's count or dtype differs; kFailed: the copy failed.
  enum class State { kPosted, kCopying, kTaken, kRefused, kFailed };
  const void* data = nullptr;
  size_t count = 0;
  gcommDataType_t dtype = gcommFloat32;
  uint64_t seq = 0;  // the sender's call number, for messages
  cudaStream_t sender_stream = nullptr;
  State state = State::kPosted;
  std::string refusal;
  cudaEvent_t ready = nullptr;   // GPU: the sender's stream reached the send
  cudaEvent_t copied = nullptr;  // GPU: the receiver's copy was done
};

namespace {
cudaEvent_t new_event() {
  cudaEvent_t e = nullptr;
  GCOMM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}
cudaStream_t stream_of(const CollectiveArgs& a) {
  return reinterpret_cast<cudaStream_t>(a.stream);
}
}  // namespace

Mailbox::Mailbox(Rendezvous& rv, gcommDevice_t device)
    : rv_(rv), device_(device), channels_(static_cast<size_t>(rv.size()) * rv.size()) {}

Mailbox::~Mailbox() {
  // Letters left by a failed batch were withdrawn; only their events remain.
  if (device_.kind != gcommDeviceCuda) return;
  DeviceGuard guard(device_);
  for (Channel& c : channels_)
    for (auto& l : c) {
      if (l->ready != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(l->ready));
      if (l->copied != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(l->copied));
    }
}

void Mailbox::run_batch(int rank, const std::vector<CollectiveArgs>& calls, bool grouped) {
  const Deadline deadline = deadline_after(rv_.timeout_s());
  const bool gpu = device_.kind == gcommDeviceCuda;
  std::optional<DeviceGuard> guard;
  if (gpu) guard.emplace(device_);
  // A send to itself is received only in its own batch: unmatched, it would wait forever.
  int self_sends = 0, self_recvs = 0;
  std::vector<const CollectiveArgs*> sends, recvs;
  for (const CollectiveArgs& c : calls) {
    (c.op == Collective::kSend ? sends : recvs).push_back(&c);
    if (c.root == rank) ++(c.op == Collective::kSend ? self_sends : self_recvs);
  }
  if (self_sends != self_recvs)
    fail(gcommInvalidArgument, "the group has ", self_sends, " send(s) to this rank itself and ", self_recvs,
         " receive(s) from it: each send to itself needs a receive from itself in the same group");
  std::vector<std::shared_ptr<Letter>> posted;
  std::string refusal;  // the first, reported once the batch is done
  try {
    for (const CollectiveArgs* c : sends) posted.push_back(post(rank, *c));
    rv_.notify_all();
    refusal = receive_all(rank, recvs, deadline, grouped);
    for (size_t i = 0; i < posted.size(); ++i) {
      std::string why = wait_taken(rank, *sends[i], *posted[i], deadline, grouped);
      if (refusal.empty()) refusal = std::move(why);
    }
  } catch (...) {
    withdraw(posted);
    throw;
  }
  if (!refusal.empty()) fail(gcommInvalidArgument, refusal);
}

std::shared_ptr<Mailbox::Letter> Mailbox::post(int rank, const CollectiveArgs& send) {
  auto letter = std::make_shared<Letter>();
  letter->data = send.send;
  letter->count = send.count;
  letter->dtype = send.dtype;
  letter->seq = send.seq;
  letter->sender_stream = stream_of(send);
  if (device_.kind == gcommDeviceCuda) {
    letter->ready = new_event();
    GCOMM_CUDA_CHECK(cudaEventRecord(letter->ready, stream_of(send)));
  }
  auto held = rv_.lock();
  if (rv_.failed_locked()) rv_.throw_failure_locked(rank);
  channel(rank, send.root).push_back(letter);
  return letter;
}

std::string Mailbox::receive_all(int rank, const std::vector<const CollectiveArgs*>& recvs, Deadline deadline,
                                 bool grouped) {
  // Each peer's receives in call order; the peers in whatever order their letters come.
  std::vector<std::deque<const CollectiveArgs*>> pending(rv_.size());
  for (const CollectiveArgs* r : recvs) pending[r->root].push_back(r);
  std::string refusal;
  for (size_t left = recvs.size(); left > 0; --left) {
    std::shared_ptr<Letter> letter;
    const CollectiveArgs* recv = nullptr;
    {
      auto held = rv_.lock();
      int from = -1;
      auto ready = [&] {
        for (int q = 0; q < rv_.size(); ++q)
          if (!pending[q].empty() && !channel(q, rank).empty()) {
            from = q;
            return true;
          }
        return rv_.failed_locked();
      };
      const bool woke = rv_.wait_until(held, deadline, ready);
      if (rv_.failed_locked()) rv_.throw_failure_locked(rank);
      if (!woke || from < 0) {
        held.unlock();
        for (const CollectiveArgs* r : recvs)  // the first receive (in call order) still waiting
          if (std::find(pending[r->root].begin(), pending[r->root].end(), r) != pending[r->root].end())
            time_out(rank, *r, "sent nothing to it", grouped);
      }
      recv = pending[from].front();
      pending[from].pop_front();
      Channel& c = channel(from, rank);
      letter = c.front();
      c.erase(c.begin());
      if (letter->count != recv->count || letter->dtype != recv->dtype) {
        letter->refusal =
            cat(call_id(*recv), " (", recv->count, " elements of ", dtype_name(recv->dtype),
                ") does not match rank ", from, "'s send #", letter->seq, " (", letter->count,
                " elements of ", dtype_name(letter->dtype),
                "): the k-th send from a rank to another meets the other's k-th receive from it");
        letter->state = Letter::State::kRefused;
        rv_.notify_all();
        if (refusal.empty()) refusal = letter->refusal;
        continue;
      }
      letter->state = Letter::State::kCopying;
    }
    copy(rank, *recv, *letter);
  }
  return refusal;
}

void Mailbox::copy(int rank, const CollectiveArgs& recv, Letter& letter) {
  const size_t bytes = recv.count * dtype_size(recv.dtype);
  try {
    if (device_.kind == gcommDeviceCuda) {
      cudaStream_t s = stream_of(recv);
      GCOMM_CUDA_CHECK(cudaStreamWaitEvent(s, letter.ready, 0));
      if (bytes > 0)
        GCOMM_CUDA_CHECK(cudaMemcpyAsync(recv.recv, letter.data, bytes, cudaMemcpyDeviceToDevice, s));
      letter.copied = new_event();
      GCOMM_CUDA_CHECK(cudaEventRecord(letter.copied, s));
    } else if (bytes > 0 && recv.recv != letter.data) {
      std::memcpy(recv.recv, letter.data, bytes);
    }
  } catch (const std::exception& e) {
    auto held = rv_.lock();
    letter.refusal =
        cat("rank ", rank, " could not copy rank ", recv.root, "'s send #", letter.seq, ": ", e.what());
    letter.state = Letter::State::kFailed;
    rv_.notify_all();
    throw;
  }
  auto held = rv_.lock();
  letter.state = Letter::State::kTaken;
  rv_.notify_all();
}

std::string Mailbox::wait_taken(int rank, const CollectiveArgs& send, Letter& letter, Deadline deadline,
                                bool grouped) {
  auto held = rv_.lock();
  auto settled = [&] {
    return letter.state != Letter::State::kPosted && letter.state != Letter::State::kCopying;
  };
  const bool done = rv_.wait_until(held, deadline, [&] { return settled() || rv_.failed_locked(); });
  if (!settled()) {
    if (rv_.failed_locked()) rv_.throw_failure_locked(rank);
    if (!done) {
      held.unlock();
      time_out(rank, send, "did not receive it", grouped);
    }
  }
  const Letter::State state = letter.state;
  const std::string why = letter.refusal;
  held.unlock();
  if (state !=
      Letter::State::kTaken) {  // refused or failed: nothing was copied, and nothing waits on its event
    if (letter.ready != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(letter.ready));
    letter.ready = nullptr;
    if (state == Letter::State::kFailed) fail(gcommRemoteError, call_id(send), ": ", why);
    return why;
  }
  if (device_.kind == gcommDeviceCuda) {
    // The sender's stream goes on after the copy out of its buffer.
    GCOMM_CUDA_CHECK(cudaStreamWaitEvent(stream_of(send), letter.copied, 0));
    GCOMM_CUDA_CHECK(cudaEventDestroy(letter.copied));
    GCOMM_CUDA_CHECK(cudaEventDestroy(letter.ready));
    letter.copied = letter.ready = nullptr;
  }
  return "";
}

void Mailbox::withdraw(const std::vector<std::shared_ptr<Letter>>& posted) noexcept {
  try {
    auto held = rv_.lock();
    for (const auto& letter : posted) {
      for (Channel& c : channels_) c.erase(std::remove(c.begin(), c.end(), letter), c.end());
      // A copy out of this buffer in progress: the caller may free it on return.
      while (letter->state == Letter::State::kCopying)
        rv_.wait_until(held, Clock::now() + std::chrono::milliseconds(10),
                       [&] { return letter->state != Letter::State::kCopying; });
    }
  } catch (...) {
  }
  if (device_.kind == gcommDeviceCuda)
    for (const auto& letter : posted) {
      // A copy already enqueued out of this buffer: the sender's stream goes on after it.
      if (letter->copied != nullptr)
        GCOMM_CUDA_WARN(cudaStreamWaitEvent(letter->sender_stream, letter->copied, 0));
      if (letter->ready != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(letter->ready));
      if (letter->copied != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(letter->copied));
      letter->ready = letter->copied = nullptr;
    }
}

void Mailbox::time_out(int rank, const CollectiveArgs& call, const char* what_peer_did, bool grouped) {
  const std::string msg = cat(
      call_id(call), grouped ? " (in a group)" : "", ": rank ", call.root, " ", what_peer_did, " within ",
      rv_.timeout_s(), " s (local transport",
      grouped
          ? "; a rank that is stuck, or that never calls the matching send or receive)"
          : ": a send completes when its peer receives it; two ranks that send to each other first need a "
            "group, gcommGroupStart/End)");
  rv_.fail(rank, gcommTimeout, msg);
  GCOMM_WARN(msg);
  fail(gcommTimeout, msg);
}

}  // namespace gradcomm::comm
