#include "comm/cuda_ipc/cuda_ipc_transport.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "comm/cuda_ipc/ipc_buffers.hpp"
#include "comm/cuda_ipc/peer_events.hpp"
#include "comm/p2p_group.hpp"
#include "comm/peer_memory/peer_memory_collective.hpp"
#include "comm/shm/shm_transport.hpp"
#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"
#include "kernels/reduce/reduce.hpp"

namespace gradcomm::comm {

using namespace bootstrap;
using cuda_ipc::BufferExports;
using cuda_ipc::PeerBuffers;
using cuda_ipc::PeerEvents;
using cuda_ipc::SharedBuffer;

namespace {

// One rank's collective call, as the control plane's all-gather carries it.
struct CallRecord {
  int32_t op = 0, dtype = 0, redop = 0, root = 0;
  int32_t unshareable = 0, pad = 0;  // 1: this rank's buffer cannot be shared (it says why)
  uint64_t count = 0, seq = 0;
  SharedBuffer send;     // what the peers read (nothing for a barrier)
  SharedBuffer scratch;  // all-reduce: this rank's reduced slice (float)
};

// A send, as the receiver gets it; and the receiver's answer.
struct Letter {
  int32_t dtype = 0, slot = 0;
  int32_t unusable = 0, pad = 0;  // 1: the sender could not share it (it says why)
  uint64_t count = 0, seq = 0;
  SharedBuffer data;
  cudaIpcEventHandle_t ready{};  // the sender's stream reached the send
};
struct Answer {
  int32_t taken = 0, failed = 0, dtype = 0, slot = 0;  // failed: the receiver's copy could not be made
  uint64_t count = 0;                                  // the receive's, for the sender's message
  cudaIpcEventHandle_t copied{};                       // the receiver's copy is done
};

// The control plane's messages travel as float32 elements.
template <class T>
size_t floats_in() {
  static_assert(sizeof(T) % sizeof(float) == 0, "a control message is a whole number of floats");
  return sizeof(T) / sizeof(float);
}

cudaEvent_t new_event(unsigned flags = cudaEventDisableTiming) {
  cudaEvent_t e = nullptr;
  GCOMM_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
  return e;
}

class CudaIpcTransport final : public Transport, public P2PBatchRunner, public PeerMemory {
 public:
  CudaIpcTransport(std::unique_ptr<Transport> control, gcommDevice_t device)
      : control_(std::move(control)),
        control_p2p_(dynamic_cast<P2PBatchRunner*>(control_.get())),
        device_(device),
        rank_(control_->rank()),
        n_(control_->size()),
        events_(std::make_unique<PeerEvents>(rank_, n_)),
        peers_(std::make_unique<PeerBuffers>()),
        sent_to_(n_, 0),
        received_from_(n_, 0),
        peer_scratch_(n_, 0) {
    require(control_p2p_ != nullptr, "the cuda-ipc transport's control plane runs no sends and receives");
    require(n_ <= kernels::kMaxReduceInputs, "the cuda-ipc transport reduces at most ",
            kernels::kMaxReduceInputs, " ranks, not ", n_);
    // Every rank's three collective events, opened by the others once.
    std::vector<cudaIpcEventHandle_t> mine(3), all(3 * static_cast<size_t>(n_));
    for (int i = 0; i < 3; ++i) mine[i] = events_->own_collective_handle(static_cast<PeerEvents::Point>(i));
    control_->run(
        host_call(Collective::kAllGather, mine.data(), all.data(), 3 * floats_in<cudaIpcEventHandle_t>()));
    for (int q = 0; q < n_; ++q)
      if (q != rank_) events_->open_collective(q, &all[3 * static_cast<size_t>(q)]);
  }

  ~CudaIpcTransport() override {
    DeviceGuard guard(device_);
    // Peers may still read this rank's memory (their last all-reduce's second phase)
    // and keep it open: meet once all have enqueued their last call, wait for it,
    // close this rank's mappings of theirs, meet again once all have, then free.
    // After an abort or a failed meeting nobody is met: a peer may still read, or a
    // stream wait on a dead peer's event, so the scratch is left allocated.
    bool met = false;
    try {
      if (!aborted_) {
        control_->run(host_call(Collective::kBarrier, nullptr, nullptr, 0));
        for (int q = 0; q < n_; ++q) GCOMM_CUDA_CHECK(cudaEventSynchronize(events_->collective(q, kDone)));
        GCOMM_CUDA_CHECK(cudaDeviceSynchronize());
        peers_.reset();
        control_->run(host_call(Collective::kBarrier, nullptr, nullptr, 0));
        met = true;
      }
    } catch (const std::exception& e) {
      GCOMM_WARN("rank ", rank_,
                 ": cuda-ipc transport: leaving without meeting the other ranks (its scratch ",
                 "stays allocated): ", e.what());
    }
    if (met) {
      for (float* s : retired_) GCOMM_CUDA_WARN(cudaFree(s));
      for (float* s : retiring_) GCOMM_CUDA_WARN(cudaFree(s));
      if (scratch_ != nullptr) GCOMM_CUDA_WARN(cudaFree(scratch_));
      events_.reset();
    } else {
      // Mappings and events are dropped without waiting (their handles are closed
      // with the process); the memory stays.
      (void)peers_.release();
      (void)events_.release();
    }
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return n_; }
  gcommDevice_t device() const noexcept override { return device_; }
  gcommTransport_t kind() const noexcept override { return gcommTransportCudaIpc; }

  gcommStatus_t poll_async_error(std::string& message) noexcept override {
    return control_->poll_async_error(message);
  }
  void abort() noexcept override {
    aborted_ = true;
    control_->abort();
  }

  void run(const CollectiveArgs& a) override {
    if (is_p2p(a.op)) {
      if (!defer_p2p_to_group_end(this, a)) run_p2p_batch({a}, false);
      return;
    }
    DeviceGuard guard(device_);
    run_peer_memory_collective(*this, a);
  }

  void run_p2p_batch(const std::vector<CollectiveArgs>& calls, bool grouped) override;

  // PeerMemory
  bool on_gpu() const noexcept override { return true; }
  size_t all_reduce_piece(size_t count) const override { return count; }

  void share_and_meet(const CollectiveArgs& a, size_t piece, const CallId& what) override {
    (void)piece;  // the whole count
    size_t lo = 0, hi = 0;
    rank_slice(a.count, n_, rank_, lo, hi);
    CallRecord mine;
    mine.op = static_cast<int32_t>(a.op);
    mine.dtype = a.dtype;
    mine.redop = a.redop;
    mine.root = a.root;
    mine.count = a.op == Collective::kBarrier ? 0 : a.count;
    mine.seq = a.seq;
    const bool shares_send =
        a.count > 0 && a.op != Collective::kBarrier && (a.op != Collective::kBroadcast || a.root == rank_);
    // A buffer that cannot be shared fails every rank at the meeting, not this one alone.
    std::string unshareable;
    try {
      if (shares_send) mine.send = exports_.share(a.send, "sendbuf");
      if (a.op == Collective::kAllReduce && hi > lo) {
        grow_scratch(hi - lo);
        mine.scratch = exports_.share(scratch_, "the all-reduce scratch");
      }
    } catch (...) {  // whatever was thrown, the meeting must still hear of it
      unshareable = as_error(std::current_exception()).message();
      mine.unshareable = 1;
    }
    GCOMM_CUDA_CHECK(
        cudaEventRecord(events_->collective(rank_, kReady), reinterpret_cast<cudaStream_t>(a.stream)));
    calls_ = meet(mine, what, unshareable);
    free_retired_scratch();
    forget_replaced_scratch(calls_);
  }
  const void* input_of(int q) override { return peers_->open(q, calls_[q].send); }
  float* scratch_of(int q, size_t k) override {
    (void)k;  // one piece
    return q == rank_ ? scratch_ : static_cast<float*>(peers_->open(q, calls_[q].scratch));
  }
  cudaEvent_t event(int q, Point p) const override { return events_->collective(q, p); }

  // The meeting after phase 1 (every rank has enqueued its reading): an all-gather of
  // whether each got through. `failed`: this rank's failure, thrown after the meeting;
  // a peer's makes every other rank throw gcommRemoteError naming it.
  void settle(const CallId& what, const Error* failed) override {
    const int32_t mine = failed != nullptr ? 1 : 0;
    std::vector<int32_t> all(n_, 0);
    control_->run(host_call(Collective::kAllGather, &mine, all.data(), 1));
    if (failed != nullptr) throw *failed;
    for (int q = 0; q < n_; ++q)
      if (all[q] != 0)
        fail(gcommRemoteError, what, ": rank ", q, " could not take part (rank ", q, " says why)");
  }

  CollectiveArgs host_call(Collective op, const void* send, void* recv, size_t floats, int peer = 0) {
    if (is_p2p(op))  // numbered per peer by the control plane itself; ranks not in the pair make none
      return p2p_call(op, op == Collective::kSend ? send : recv, floats, gcommFloat32, peer, nullptr);
    CollectiveArgs c = collective_call(op, send, recv, floats, gcommFloat32, nullptr);
    c.seq = ++control_seq_;  // every rank makes the same control collectives
    return c;
  }

  // The all-gather of every rank's call; every rank checks all of them alike, so a
  // mismatch fails every rank with the same message and leaves them in step.
  std::vector<CallRecord> meet(const CallRecord& mine, const CallId& what, const std::string& unshareable) {
    std::vector<CallRecord> all(n_);
    control_->run(host_call(Collective::kAllGather, &mine, all.data(), floats_in<CallRecord>()));
    for (int q = 0; q < n_; ++q)
      if (all[q].unshareable != 0)
        fail(
            gcommInvalidArgument, what, ": ",
            q == rank_ ? unshareable : cat("rank ", q, "'s buffer cannot be shared (rank ", q, " says why)"));
    const auto sig = [](const CallRecord& r) {
      return CallSignature{static_cast<Collective>(r.op), r.count, static_cast<gcommDataType_t>(r.dtype),
                           static_cast<gcommRedOp_t>(r.redop), r.root};
    };
    for (int q = 1; q < n_; ++q)
      if (!(sig(all[q]) == sig(all[0])))
        fail(gcommInvalidArgument, what, ": rank ", q, " called ", describe(sig(all[q])),
             " where rank 0 called ", describe(sig(all[0])), " (call #", all[q].seq, " and #", all[0].seq,
             "): every rank must make the same collective calls in the same order");
    return all;
  }

  // Grows this rank's scratch. The old one is freed two meetings later: at the next,
  // the peers learn of the new one and close their mapping of the old.
  void grow_scratch(size_t elems) {
    if (elems <= scratch_elems_) return;
    const size_t want = std::max(elems, 2 * scratch_elems_);
    void* p = nullptr;
    GCOMM_CUDA_CHECK(cudaMalloc(&p, want * sizeof(float)));
    if (scratch_ != nullptr) retiring_.push_back(scratch_);
    scratch_ = static_cast<float*>(p);
    scratch_elems_ = want;
  }
  // After a meeting every peer has finished the call before (its end is recorded,
  // and it closed its mapping of a scratch retired at the meeting before that).
  void free_retired_scratch() {
    if (!retired_.empty()) {
      for (int q = 0; q < n_; ++q) GCOMM_CUDA_CHECK(cudaEventSynchronize(events_->collective(q, kDone)));
      for (float* s : retired_) GCOMM_CUDA_CHECK(cudaFree(s));
      retired_.clear();
    }
    retired_.swap(retiring_);
  }
  // A peer's scratch that it replaced: closed here once this rank's last read of it
  // (its previous call's second phase) is done, so the peer can free it.
  void forget_replaced_scratch(const std::vector<CallRecord>& all) {
    for (int q = 0; q < n_; ++q) {
      const uint64_t id = all[q].scratch.buffer_id;
      if (q == rank_ || id == 0 || id == peer_scratch_[q]) continue;
      if (peer_scratch_[q] != 0) {
        GCOMM_CUDA_CHECK(cudaEventSynchronize(events_->collective(rank_, kDone)));
        peers_->close(q, peer_scratch_[q]);
      }
      peer_scratch_[q] = id;
    }
  }

  std::string copy_to_itself(const std::vector<const CollectiveArgs*>& sends,
                             const std::vector<const CollectiveArgs*>& recvs);

  std::unique_ptr<Transport> control_;
  P2PBatchRunner* control_p2p_;
  const gcommDevice_t device_;
  const int rank_, n_;
  // Made and destroyed with the device current (the constructor's caller holds it).
  std::unique_ptr<PeerEvents> events_;
  BufferExports exports_;
  std::unique_ptr<PeerBuffers> peers_;
  std::vector<uint64_t> sent_to_, received_from_;  // letters, per peer: their slots
  float* scratch_ = nullptr;
  size_t scratch_elems_ = 0;
  std::vector<float*> retiring_, retired_;  // replaced scratch, freed two meetings later (grow_scratch)
  std::vector<uint64_t> peer_scratch_;      // each peer's scratch (its buffer id) as last seen
  std::vector<CallRecord> calls_;           // every rank's current call, from the meeting
  uint64_t control_seq_ = 0;
  std::atomic<bool> aborted_{false};  // set by the watchdog's thread
};

// Sends and receives to itself: matched in call order, copied in this process.
// Returns what is wrong ("" if nothing), for the end of the batch.
std::string CudaIpcTransport::copy_to_itself(const std::vector<const CollectiveArgs*>& sends,
                                             const std::vector<const CollectiveArgs*>& recvs) {
  if (sends.size() != recvs.size())
    return cat("the group has ", sends.size(), " send(s) to this rank itself and ", recvs.size(),
               " receive(s) from it: each send to itself needs a receive from itself in the same group");
  for (size_t i = 0; i < sends.size(); ++i) {
    const CollectiveArgs& s = *sends[i];
    const CollectiveArgs& r = *recvs[i];
    if (s.count != r.count || s.dtype != r.dtype)
      return cat(call_id(r), " (", r.count, " elements of ", dtype_name(r.dtype),
                 ") does not match this rank's send #", s.seq, " to itself (", s.count, " elements of ",
                 dtype_name(s.dtype), ")");
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    const CollectiveArgs& s = *sends[i];
    const CollectiveArgs& r = *recvs[i];
    const auto ss = reinterpret_cast<cudaStream_t>(s.stream), rs = reinterpret_cast<cudaStream_t>(r.stream);
    cudaEvent_t ready = new_event(), copied = new_event();
    GCOMM_CUDA_CHECK(cudaEventRecord(ready, ss));
    GCOMM_CUDA_CHECK(cudaStreamWaitEvent(rs, ready, 0));
    if (s.count > 0 && r.recv != s.send)
      GCOMM_CUDA_CHECK(
          cudaMemcpyAsync(r.recv, s.send, s.count * dtype_size(s.dtype), cudaMemcpyDeviceToDevice, rs));
    GCOMM_CUDA_CHECK(cudaEventRecord(copied, rs));
    GCOMM_CUDA_CHECK(cudaStreamWaitEvent(ss, copied, 0));
    // Destroying a recorded event is safe: CUDA keeps it until its work is done.
    GCOMM_CUDA_WARN(cudaEventDestroy(ready));
    GCOMM_CUDA_WARN(cudaEventDestroy(copied));
  }
  return "";
}

// Two rounds of host messages with the peers, whatever goes wrong on this rank
// (a peer waiting for a letter or an answer would otherwise wait for the timeout):
// the letters, then, after the copies, the answers. Errors are thrown at the end.
void CudaIpcTransport::run_p2p_batch(const std::vector<CollectiveArgs>& calls, bool grouped) {
  DeviceGuard guard(device_);
  std::vector<const CollectiveArgs*> sends, recvs, self_sends, self_recvs;
  for (const CollectiveArgs& c : calls) {
    const bool self = c.root == rank_;
    if (c.op == Collective::kSend)
      (self ? self_sends : sends).push_back(&c);
    else
      (self ? self_recvs : recvs).push_back(&c);
  }
  // Both sides check the slots a group needs, so both refuse before any message.
  std::vector<int> to(n_, 0), from(n_, 0);
  for (const CollectiveArgs* c : sends) ++to[c->root];
  for (const CollectiveArgs* c : recvs) ++from[c->root];
  for (int q = 0; q < n_; ++q)
    if (to[q] > PeerEvents::kMaxLettersPerPeer || from[q] > PeerEvents::kMaxLettersPerPeer)
      fail(gcommInvalidArgument, "a group on the cuda-ipc transport holds more than ",
           PeerEvents::kMaxLettersPerPeer, " sends between this rank and rank ", q, ": split it into groups");
  gcommStatus_t status = gcommSuccess;
  std::string error;
  const auto note = [&](gcommStatus_t st, std::string why) {
    if (status == gcommSuccess) {
      status = st;
      error = std::move(why);
    }
  };
  const char* in_group = grouped ? " (in a group)" : "";

  // Round 1: the letters.
  std::vector<Letter> out(sends.size()), in(recvs.size());
  std::vector<CollectiveArgs> round;
  for (size_t i = 0; i < sends.size(); ++i) {
    const CollectiveArgs& s = *sends[i];
    Letter& l = out[i];
    l.dtype = s.dtype;
    l.count = s.count;
    l.seq = s.seq;
    l.slot = static_cast<int32_t>(sent_to_[s.root]++ % PeerEvents::kMaxLettersPerPeer);
    try {
      if (s.count > 0) l.data = exports_.share(s.send, "the send's buffer");
      cudaEvent_t ready = events_->own_letter_event(PeerEvents::kSendReady, s.root, l.slot, &l.ready);
      GCOMM_CUDA_CHECK(cudaEventRecord(ready, reinterpret_cast<cudaStream_t>(s.stream)));
    } catch (...) {
      const Error e = as_error(std::current_exception());
      l.unusable = 1;  // the receiver refuses it
      note(e.status(), cat(call_id(s), in_group, ": ", e.message()));
    }
    round.push_back(host_call(Collective::kSend, &l, nullptr, floats_in<Letter>(), s.root));
  }
  for (size_t i = 0; i < recvs.size(); ++i)
    round.push_back(host_call(Collective::kRecv, nullptr, &in[i], floats_in<Letter>(), recvs[i]->root));
  control_p2p_->run_p2p_batch(round, grouped);

  // The copies, then round 2: the answers.
  std::vector<Answer> answers(recvs.size()), back(sends.size());
  round.clear();
  for (size_t i = 0; i < recvs.size(); ++i) {
    const CollectiveArgs& r = *recvs[i];
    const Letter& l = in[i];
    Answer& a = answers[i];
    a.count = r.count;
    a.dtype = r.dtype;
    a.slot = static_cast<int32_t>(received_from_[r.root]++ % PeerEvents::kMaxLettersPerPeer);
    if (l.unusable != 0) {
      a.failed = 1;
      note(gcommRemoteError, cat(call_id(r), in_group, ": rank ", r.root, " could not send its buffer (rank ",
                                 r.root, " says why)"));
    } else if (l.count != r.count || l.dtype != r.dtype) {
      note(gcommInvalidArgument,
           cat(call_id(r), in_group, " (", r.count, " elements of ", dtype_name(r.dtype),
               ") does not match rank ", r.root, "'s send #", l.seq, " (", l.count, " elements of ",
               dtype_name(static_cast<gcommDataType_t>(l.dtype)),
               "): the k-th send from a rank to another meets the other's k-th receive from it"));
    } else {
      try {
        const auto rs = reinterpret_cast<cudaStream_t>(r.stream);
        GCOMM_CUDA_CHECK(cudaStreamWaitEvent(rs, events_->peer_letter_event(r.root, l.slot, l.ready), 0));
        if (r.count > 0)
          GCOMM_CUDA_CHECK(cudaMemcpyAsync(r.recv, peers_->open(r.root, l.data),
                                           r.count * dtype_size(r.dtype), cudaMemcpyDeviceToDevice, rs));
        cudaEvent_t copied = events_->own_letter_event(PeerEvents::kCopied, r.root, a.slot, &a.copied);
        GCOMM_CUDA_CHECK(cudaEventRecord(copied, rs));
        a.taken = 1;
      } catch (...) {
        const Error e = as_error(std::current_exception());
        a.failed = 1;
        note(e.status(), cat(call_id(r), in_group, ": ", e.message()));
      }
    }
    round.push_back(host_call(Collective::kSend, &a, nullptr, floats_in<Answer>(), r.root));
  }
  for (size_t i = 0; i < sends.size(); ++i)
    round.push_back(host_call(Collective::kRecv, nullptr, &back[i], floats_in<Answer>(), sends[i]->root));
  control_p2p_->run_p2p_batch(round, grouped);

  for (size_t i = 0; i < sends.size(); ++i) {
    const CollectiveArgs& s = *sends[i];
    const Answer& a = back[i];
    if (a.taken != 0) {
      // The sender's stream goes on after the copy out of its buffer.
      GCOMM_CUDA_CHECK(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(s.stream),
                                           events_->peer_letter_event(s.root, a.slot, a.copied, true), 0));
    } else if (a.failed != 0) {
      note(gcommRemoteError, cat(call_id(s), in_group, ": rank ", s.root, " could not receive it (rank ",
                                 s.root, " says why)"));
    } else {
      note(gcommInvalidArgument,
           cat(call_id(s), in_group, " (", s.count, " elements of ", dtype_name(s.dtype),
               ") does not match rank ", s.root, "'s receive (", a.count, " elements of ",
               dtype_name(static_cast<gcommDataType_t>(a.dtype)),
               "): the k-th send from a rank to another meets the other's k-th receive from it"));
    }
  }
  const std::string self = copy_to_itself(self_sends, self_recvs);
  if (!self.empty()) note(gcommInvalidArgument, self);
  if (status != gcommSuccess) fail(status, error);
}

}  // namespace

std::unique_ptr<Transport> make_cuda_ipc_transport(Bootstrap& met, const LaunchConfig& launch,
                                                   gcommDevice_t device) {
  std::string why_not;
  std::unique_ptr<Transport> control = try_make_shm_transport(met, launch, why_not);
  if (control == nullptr)
    fail(gcommInvalidArgument,
         "the cuda-ipc transport's processes meet in shared memory, which failed: ", why_not);
  DeviceGuard guard(device);
  return std::make_unique<CudaIpcTransport>(std::move(control), device);
}

}  // namespace gradcomm::comm
