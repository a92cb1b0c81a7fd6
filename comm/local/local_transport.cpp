#include "comm/local/local_transport.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "comm/local/mailbox.hpp"
#include "comm/local/rendezvous.hpp"
#include "comm/p2p_group.hpp"
#include "comm/peer_memory/peer_memory_collective.hpp"
#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "kernels/reduce/reduce.hpp"

namespace gradcomm::comm {

namespace {

// A host all-reduce's piece: its float sums fill one half of the scratch while
// the other half's are converted (one meeting per piece).
constexpr size_t kHostPiece = size_t{2} << 20;  // elements: 8 MiB of float

// State shared by the ranks of one local group.
struct LocalGroup {
  LocalGroup(int n, gcommDevice_t dev, double timeout_s) : rv(n, timeout_s), mailbox(rv, dev), device(dev) {}
  ~LocalGroup() {
    if (device.kind != gcommDeviceCuda) return;
    DeviceGuard guard(device);
    for (auto* list : {&ready, &computed, &done})
      for (cudaEvent_t e : *list) GCOMM_CUDA_WARN(cudaEventDestroy(e));
    if (dev_scratch != nullptr) GCOMM_CUDA_WARN(cudaFree(dev_scratch));
  }
  Rendezvous rv;
  Mailbox mailbox;  // sends and receives
  gcommDevice_t device;
  // The all-reduce scratch (float), one for the group: rank q's slice of a round
  // lies at its rank_slice offset, so the slices convert at once. Grown by rank 0
  // between two meetings (PeerMemory's step 1). On the host, two halves of a piece.
  std::vector<float> host_scratch;
  float* dev_scratch = nullptr;
  size_t dev_scratch_elems = 0;
  // Per-rank events (GPU), in PeerMemory::Point order's lists.
  std::vector<cudaEvent_t> ready, computed, done;
};

// A rank's transport is its backend of the peer-memory collective
// (comm/peer_memory/), over the group's rendezvous.
class LocalTransport final : public Transport, public P2PBatchRunner, public PeerMemory {
 public:
  LocalTransport(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return group_->rv.size(); }
  gcommDevice_t device() const noexcept override { return group_->device; }
  gcommTransport_t kind() const noexcept override { return gcommTransportLocal; }

  void run(const CollectiveArgs& a) override {
    if (is_p2p(a.op)) {
      if (!defer_p2p_to_group_end(this, a)) run_p2p_batch({a}, false);
      return;
    }
    std::optional<DeviceGuard> guard;
    if (on_gpu()) guard.emplace(group_->device);
    run_peer_memory_collective(*this, a);
  }

  void run_p2p_batch(const std::vector<CollectiveArgs>& calls, bool grouped) override {
    group_->mailbox.run_batch(rank_, calls, grouped);
  }

  gcommStatus_t poll_async_error(std::string& message) noexcept override {
    (void)message;
    return gcommSuccess;  // failures surface in run(); the group is poisoned for peers
  }

  void abort() noexcept override {
    group_->rv.fail(rank_, gcommAborted, cat("rank ", rank_, " aborted its communicator"));
  }

  // PeerMemory
  bool on_gpu() const noexcept override { return group_->device.kind == gcommDeviceCuda; }
  size_t all_reduce_piece(size_t count) const override {
    return on_gpu() ? count : std::min(count, kHostPiece);
  }

  void share_and_meet(const CollectiveArgs& a, size_t piece, const CallId& what) override {
    LocalGroup& g = *group_;
    if (on_gpu()) GCOMM_CUDA_CHECK(cudaEventRecord(g.ready[rank_], reinterpret_cast<cudaStream_t>(a.stream)));
    CallSignature sig{a.op, a.count, a.dtype, a.redop, a.root};
    if (a.op == Collective::kBarrier) sig.count = 0;
    g.rv.exchange(rank_, sig, a.send, a.recv, what);
    count_ = a.count;
    piece_ = piece;
    if (a.op != Collective::kAllReduce) return;
    // Every rank reads the size before the first meeting, rank 0 changes it after.
    const bool grow = on_gpu() ? g.dev_scratch_elems < piece : g.host_scratch.size() < 2 * piece;
    if (!grow) return;
    g.rv.arrive_and_wait(rank_, what);
    if (rank_ == 0) {
      try {
        grow_scratch(piece);
      } catch (...) {  // the peers wait at the next meeting: tell them
        const Error e = as_error(std::current_exception());
        g.rv.fail(rank_, e.status(), e.message());
        throw e;
      }
    }
    g.rv.arrive_and_wait(rank_, what);
  }

  const void* input_of(int q) override { return group_->rv.send_of(q); }
  float* scratch_of(int q, size_t k) override {
    const size_t first = k * piece_;
    size_t lo = 0, hi = 0;
    rank_slice(std::min(piece_, count_ - first), size(), q, lo, hi);
    return on_gpu() ? group_->dev_scratch + lo : group_->host_scratch.data() + (k % 2) * piece_ + lo;
  }
  cudaEvent_t event(int q, Point p) const override {
    const std::vector<cudaEvent_t>& list =
        p == kReady ? group_->ready : (p == kComputed ? group_->computed : group_->done);
    return list[q];
  }
  void settle(const CallId& what, const Error* failed) override {
    if (failed != nullptr) {
      group_->rv.fail(rank_, failed->status(), failed->message());
      throw *failed;
    }
    group_->rv.arrive_and_wait(rank_, what);
  }

 private:
  // Every rank has met since its last call ended (on a GPU: recorded its kDone).
  void grow_scratch(size_t piece) {
    LocalGroup& g = *group_;
    if (!on_gpu()) {
      g.host_scratch.resize(2 * piece);
      return;
    }
    // Its kernels may still run: the peers' second phases read the old scratch.
    for (cudaEvent_t done : g.done) GCOMM_CUDA_CHECK(cudaEventSynchronize(done));
    if (g.dev_scratch != nullptr) GCOMM_CUDA_CHECK(cudaFree(g.dev_scratch));
    g.dev_scratch = nullptr;
    g.dev_scratch_elems = 0;
    void* p = nullptr;
    GCOMM_CUDA_CHECK(cudaMalloc(&p, piece * sizeof(float)));
    g.dev_scratch = static_cast<float*>(p);
    g.dev_scratch_elems = piece;
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
  size_t count_ = 0, piece_ = 0;  // the current call's
};

}  // namespace

std::vector<std::unique_ptr<Transport>> make_local_transports(int nranks, gcommDevice_t device,
                                                              double timeout_s) {
  require(nranks >= 1 && nranks <= kernels::kMaxReduceInputs, "nranks must be in [1, ",
          kernels::kMaxReduceInputs, "], not ", nranks);
  require(timeout_s > 0, "timeout must be positive, not ", timeout_s);
  device = validate_device(device);
  auto group = std::make_shared<LocalGroup>(nranks, device, timeout_s);
  if (device.kind == gcommDeviceCuda) {
    DeviceGuard guard(device);
    for (auto* list : {&group->ready, &group->computed, &group->done})
      for (int r = 0; r < nranks; ++r) {
        cudaEvent_t e = nullptr;
        GCOMM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        list->push_back(e);
      }
  }
  std::vector<std::unique_ptr<Transport>> result;
  for (int r = 0; r < nranks; ++r) result.push_back(std::make_unique<LocalTransport>(group, r));
  return result;
}

}  // namespace gradcomm::comm
