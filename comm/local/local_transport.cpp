#include "comm/local/local_transport.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/local/mailbox.hpp"
#include "comm/local/rendezvous.hpp"
#include "comm/p2p_group.hpp"
#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "kernels/reduce/reduce.hpp"

namespace gradcomm::comm {

namespace {

// A host all-reduce's piece: its float sums fill one half of the scratch while
// the other half's are converted (one barrier per piece).
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
  // Reduction scratch (float), grown by rank 0 at the start of an op, when every
  // rank has finished the previous one (each op ends with a barrier). On the
  // host, two pieces of kHostPiece (an all-reduce goes piece by piece), so no
  // count a caller gives sizes it (issue 44 #7's sibling).
  std::vector<float> host_scratch;
  float* dev_scratch = nullptr;
  size_t dev_scratch_elems = 0;
  // Per-rank events (GPU): inputs ready, phase 1 done, op done.
  std::vector<cudaEvent_t> ready, computed, done;
};

class LocalTransport final : public Transport, public P2PBatchRunner {
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
    const CallId what = call_id(a);
    CallSignature sig{a.op, a.count, a.dtype, a.redop, a.root};
    if (a.op == Collective::kBarrier) sig.count = 0;
    if (gpu()) {
      run_gpu(a, sig, what);
    } else {
      run_host(a, sig, what);
    }
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

 private:
  bool gpu() const { return group_->device.kind == gcommDeviceCuda; }
  size_t es(const CollectiveArgs& a) const { return dtype_size(a.dtype); }
  const void* send_at(int q, size_t elem, const CollectiveArgs& a) const {
    return static_cast<const char*>(group_->rv.send_of(q)) + elem * es(a);
  }
  void* recv_at(int q, size_t elem, const CollectiveArgs& a) const {
    return static_cast<char*>(group_->rv.recv_of(q)) + elem * es(a);
  }
  std::vector<const void*> sends(size_t offset, const CollectiveArgs& a) const {
    std::vector<const void*> s(size());
    for (int q = 0; q < size(); ++q) s[q] = send_at(q, offset, a);
    return s;
  }

  void run_host(const CollectiveArgs& a, const CallSignature& sig, const CallId& what) {
    Rendezvous& rv = group_->rv;
    int n = size();
    const size_t piece = std::min(a.count, kHostPiece);
    if (a.op == Collective::kAllReduce && rank_ == 0 && group_->host_scratch.size() < 2 * piece)
      group_->host_scratch.resize(2 * piece);
    rv.exchange(rank_, sig, a.send, a.recv, what);
    switch (a.op) {
      case Collective::kAllReduce: {
        // Piece k's sums go to half k % 2 of the scratch: a rank that reduces piece
        // k + 2 into it has passed piece k + 1's barrier, which every rank reached
        // after converting piece k. In place, piece k is written only after its
        // barrier, when every rank has read it.
        for (size_t first = 0, k = 0; first < a.count; first += piece, ++k) {
          const size_t m = std::min(piece, a.count - first);
          float* sums = group_->host_scratch.data() + (k % 2) * piece;
          size_t lo, hi;
          rank_slice(m, n, rank_, lo, hi);
          kernels::reduce_host::reduce_to_float(sends(first, a).data(), n, lo, hi - lo, a.dtype, a.redop,
                                                sums + lo);
          rv.arrive_and_wait(rank_, what);
          kernels::reduce_host::float_to_typed(sums, static_cast<char*>(a.recv) + first * es(a), m, a.dtype);
        }
        break;
      }
      case Collective::kReduce:
        if (rank_ == a.root)
          kernels::reduce_host::reduce_to_typed(sends(0, a).data(), n, 0, a.count, a.dtype, a.redop, a.recv);
        break;
      case Collective::kReduceScatter:
        kernels::reduce_host::reduce_to_typed(sends(rank_ * a.count, a).data(), n, 0, a.count, a.dtype,
                                              a.redop, a.recv);
        break;
      case Collective::kBroadcast:
        if (a.recv != rv.send_of(a.root)) std::memcpy(a.recv, rv.send_of(a.root), a.count * es(a));
        break;
      case Collective::kAllGather:
        for (int q = 0; q < n; ++q) {
          void* dst = recv_at(rank_, q * a.count, a);
          // In place, block q of this rank's buffer is rank q's input only for q == rank.
          if (dst != rv.send_of(q)) std::memcpy(dst, rv.send_of(q), a.count * es(a));
        }
        break;
      case Collective::kAllToAll:
        // Block q of this rank's output is block `rank_` of rank q's input.
        if (a.count > 0)
          for (int q = 0; q < n; ++q)
            std::memcpy(recv_at(rank_, q * a.count, a), send_at(q, rank_ * a.count, a), a.count * es(a));
        break;
      case Collective::kBarrier:
        break;
      case Collective::kSend:
      case Collective::kRecv:
        break;  // run_p2p_batch
    }
    // Nobody returns (and reuses its buffers) before every rank has read them.
    rv.arrive_and_wait(rank_, what);
  }

  void run_gpu(const CollectiveArgs& a, const CallSignature& sig, const CallId& what) {
    Rendezvous& rv = group_->rv;
    LocalGroup& g = *group_;
    int n = size();
    DeviceGuard guard(g.device);
    auto stream = reinterpret_cast<cudaStream_t>(a.stream);
    if (a.op == Collective::kAllReduce && rank_ == 0 && g.dev_scratch_elems < a.count) {
      // Growing the scratch: every rank's previous op has completed on the host
      // side, but its kernels may still run: wait for them first.
      for (int q = 0; q < n; ++q) GCOMM_CUDA_CHECK(cudaEventSynchronize(g.done[q]));
      if (g.dev_scratch != nullptr) GCOMM_CUDA_CHECK(cudaFree(g.dev_scratch));
      g.dev_scratch = nullptr;
      g.dev_scratch_elems = 0;
      void* p = nullptr;
      GCOMM_CUDA_CHECK(cudaMalloc(&p, a.count * sizeof(float)));
      g.dev_scratch = static_cast<float*>(p);
      g.dev_scratch_elems = a.count;
    }
    GCOMM_CUDA_CHECK(cudaEventRecord(g.ready[rank_], stream));
    rv.exchange(rank_, sig, a.send, a.recv, what);
    // Phase 1 reads every rank's input (and, for all-reduce, rewrites the
    // scratch the previous op's phase 2 read): wait for both.
    for (int q = 0; q < n; ++q) {
      GCOMM_CUDA_CHECK(cudaStreamWaitEvent(stream, g.ready[q], 0));
      GCOMM_CUDA_CHECK(cudaStreamWaitEvent(stream, g.done[q], 0));
    }
    switch (a.op) {
      case Collective::kAllReduce: {
        size_t lo, hi;
        rank_slice(a.count, n, rank_, lo, hi);
        kernels::reduce_cuda::reduce_to_float(sends(0, a).data(), n, lo, hi - lo, a.dtype, a.redop,
                                              g.dev_scratch + lo, a.stream);
        break;
      }
      case Collective::kReduce:
        if (rank_ == a.root)
          kernels::reduce_cuda::reduce_to_typed(sends(0, a).data(), n, 0, a.count, a.dtype, a.redop, a.recv,
                                                a.stream);
        break;
      case Collective::kReduceScatter:
        kernels::reduce_cuda::reduce_to_typed(sends(rank_ * a.count, a).data(), n, 0, a.count, a.dtype,
                                              a.redop, a.recv, a.stream);
        break;
      case Collective::kBroadcast:
        if (a.recv != rv.send_of(a.root) && a.count > 0)
          GCOMM_CUDA_CHECK(
              cudaMemcpyAsync(a.recv, rv.send_of(a.root), a.count * es(a), cudaMemcpyDeviceToDevice, stream));
        break;
      case Collective::kAllGather:
        for (int q = 0; q < n; ++q) {
          void* dst = recv_at(rank_, q * a.count, a);
          if (dst != rv.send_of(q) && a.count > 0)
            GCOMM_CUDA_CHECK(
                cudaMemcpyAsync(dst, rv.send_of(q), a.count * es(a), cudaMemcpyDeviceToDevice, stream));
        }
        break;
      case Collective::kAllToAll:
        if (a.count > 0)
          for (int q = 0; q < n; ++q)
            GCOMM_CUDA_CHECK(cudaMemcpyAsync(recv_at(rank_, q * a.count, a), send_at(q, rank_ * a.count, a),
                                             a.count * es(a), cudaMemcpyDeviceToDevice, stream));
        break;
      case Collective::kBarrier:
        break;
      case Collective::kSend:
      case Collective::kRecv:
        break;  // run_p2p_batch
    }
    GCOMM_CUDA_CHECK(cudaEventRecord(g.computed[rank_], stream));
    rv.arrive_and_wait(rank_, what);
    // This rank's stream continues only after every rank finished reading its
    // buffers (phase 1 everywhere), so later work may overwrite them.
    for (int q = 0; q < n; ++q) GCOMM_CUDA_CHECK(cudaStreamWaitEvent(stream, g.computed[q], 0));
    if (a.op == Collective::kAllReduce)
      kernels::reduce_cuda::float_to_typed(g.dev_scratch, a.recv, a.count, a.dtype, a.stream);
    GCOMM_CUDA_CHECK(cudaEventRecord(g.done[rank_], stream));
    // No rank re-records its events (next op) before every peer has enqueued its waits on them.
    rv.arrive_and_wait(rank_, what);
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
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
