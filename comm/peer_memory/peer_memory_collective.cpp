#include "comm/peer_memory/peer_memory_collective.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/cuda_check.hpp"
#include "common/dtype.hpp"
#include "kernels/reduce/reduce.hpp"

namespace gradcomm::comm {

namespace {

// The kernels of one side: host functions, or CUDA ones enqueued on the call's stream.
struct Kernels {
  bool gpu;
  gcommStream_t stream;

  void reduce_to_float(const void* const* in, int n, size_t offset, size_t count, gcommDataType_t dtype,
                       gcommRedOp_t op, float* out) const {
    if (count == 0) return;
    if (gpu)
      kernels::reduce_cuda::reduce_to_float(in, n, offset, count, dtype, op, out, stream);
    else
      kernels::reduce_host::reduce_to_float(in, n, offset, count, dtype, op, out);
  }
  void reduce_to_typed(const void* const* in, int n, size_t count, gcommDataType_t dtype, gcommRedOp_t op,
                       void* out) const {
    if (count == 0) return;
    if (gpu)
      kernels::reduce_cuda::reduce_to_typed(in, n, 0, count, dtype, op, out, stream);
    else
      kernels::reduce_host::reduce_to_typed(in, n, 0, count, dtype, op, out);
  }
  void float_to_typed(const float* in, void* out, size_t count, gcommDataType_t dtype) const {
    if (count == 0) return;
    if (gpu)
      kernels::reduce_cuda::float_to_typed(in, out, count, dtype, stream);
    else
      kernels::reduce_host::float_to_typed(in, out, count, dtype);
  }
  // Copies between buffers; one that is its own source (in place) is left alone.
  void copy(void* out, const void* in, size_t bytes) const {
    if (bytes == 0 || out == in) return;
    if (gpu)
      GCOMM_CUDA_CHECK(
          cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, reinterpret_cast<cudaStream_t>(stream)));
    else
      std::memcpy(out, in, bytes);
  }
};

class PeerMemoryCall {
 public:
  PeerMemoryCall(PeerMemory& peers, const CollectiveArgs& a)
      : p_(peers),
        a_(a),
        k_{peers.on_gpu(), a.stream},
        n_(peers.size()),
        rank_(peers.rank()),
        es_(dtype_size(a.dtype)),
        stream_(reinterpret_cast<cudaStream_t>(a.stream)),
        inputs_(n_),
        slices_(n_) {}

  void run() {
    const CallId what = call_id(a_);
    const bool all_reduce = a_.op == Collective::kAllReduce;
    const size_t piece = all_reduce ? p_.all_reduce_piece(a_.count) : a_.count;
    require(!p_.on_gpu() || piece >= a_.count, "a peer-memory backend on a GPU reduces in one piece");
    p_.share_and_meet(a_, piece, what);
    size_t first = 0, k = 0;
    do {  // one round for every collective but a host all-reduce of more than one piece
      const size_t m = all_reduce ? std::min(piece, a_.count - first) : a_.count;
      try {
        phase_one(first, m, k);
      } catch (...) {
        const Error e = as_error(std::current_exception());
        p_.settle(what, &e);
      }
      p_.settle(what, nullptr);
      // Every rank has read this rank's input (and its scratch's last round) once
      // every phase one is done: only then may later work on this stream rewrite them.
      wait_for_all(PeerMemory::kComputed);
      if (all_reduce) phase_two(first, m);
      first += m;
      ++k;
    } while (first < a_.count);
    record(PeerMemory::kDone);
  }

 private:
  const void* in_at(int q, size_t elem) const { return static_cast<const char*>(inputs_[q]) + elem * es_; }
  char* out_at(size_t elem) const { return static_cast<char*>(a_.recv) + elem * es_; }
  std::vector<const void*> inputs_at(size_t elem) const {
    std::vector<const void*> s(n_);
    for (int q = 0; q < n_; ++q) s[q] = in_at(q, elem);
    return s;
  }
  void record(PeerMemory::Point point) const {
    if (p_.on_gpu()) GCOMM_CUDA_CHECK(cudaEventRecord(p_.event(rank_, point), stream_));
  }
  void wait_for_all(PeerMemory::Point point) const {
    if (p_.on_gpu())
      for (int q = 0; q < n_; ++q) GCOMM_CUDA_CHECK(cudaStreamWaitEvent(stream_, p_.event(q, point), 0));
  }

  // Round k (elements [first, first + m) of an all-reduce; the whole call otherwise).
  void phase_one(size_t first, size_t m, size_t k) {
    if (k == 0) {
      for (int q = 0; q < n_; ++q) inputs_[q] = q == rank_ ? a_.send : p_.input_of(q);
      // Every rank's input is ready, and every rank's call before is done: its
      // second phase read the scratch this one rewrites.
      wait_for_all(PeerMemory::kReady);
      wait_for_all(PeerMemory::kDone);
    }
    switch (a_.op) {
      case Collective::kAllReduce: {
        for (int q = 0; q < n_; ++q) slices_[q] = p_.scratch_of(q, k);
        size_t lo = 0, hi = 0;
        rank_slice(m, n_, rank_, lo, hi);
        k_.reduce_to_float(inputs_at(first).data(), n_, lo, hi - lo, a_.dtype, a_.redop, slices_[rank_]);
        break;
      }
      case Collective::kReduce:
        if (rank_ == a_.root) k_.reduce_to_typed(inputs_.data(), n_, m, a_.dtype, a_.redop, a_.recv);
        break;
      case Collective::kReduceScatter:
        k_.reduce_to_typed(inputs_at(rank_ * m).data(), n_, m, a_.dtype, a_.redop, a_.recv);
        break;
      case Collective::kBroadcast:
        k_.copy(a_.recv, inputs_[a_.root], m * es_);
        break;
      case Collective::kAllGather:
        // In place, block q of this rank's buffer is rank q's input only for q == rank.
        for (int q = 0; q < n_; ++q) k_.copy(out_at(q * m), inputs_[q], m * es_);
        break;
      case Collective::kAllToAll:
        // Block q of this rank's output is block `rank` of rank q's input.
        for (int q = 0; q < n_; ++q) k_.copy(out_at(q * m), in_at(q, rank_ * m), m * es_);
        break;
      case Collective::kBarrier:
      case Collective::kSend:
      case Collective::kRecv:
        break;
    }
    record(PeerMemory::kComputed);
  }

  // Every rank's slice of the round, converted to the dtype into recv.
  void phase_two(size_t first, size_t m) {
    if (m == 0) return;
    // Slices laid end to end (the local transport's one scratch) convert at once.
    bool contiguous = slices_[0] != nullptr;
    for (int q = 0; q < n_ && contiguous; ++q) {
      size_t lo = 0, hi = 0;
      rank_slice(m, n_, q, lo, hi);
      contiguous = slices_[q] == slices_[0] + lo;
    }
    if (contiguous) {
      k_.float_to_typed(slices_[0], out_at(first), m, a_.dtype);
      return;
    }
    for (int q = 0; q < n_; ++q) {
      size_t lo = 0, hi = 0;
      rank_slice(m, n_, q, lo, hi);
      k_.float_to_typed(slices_[q], out_at(first + lo), hi - lo, a_.dtype);
    }
  }

  PeerMemory& p_;
  const CollectiveArgs& a_;
  const Kernels k_;
  const int n_, rank_;
  const size_t es_;
  const cudaStream_t stream_;
  std::vector<const void*> inputs_;
  std::vector<float*> slices_;  // all-reduce: every rank's float slice of the round
};

}  // namespace

void run_peer_memory_collective(PeerMemory& peers, const CollectiveArgs& a) {
  require(!is_p2p(a.op), "sends and receives do not run as a peer-memory collective");
  PeerMemoryCall(peers, a).run();
}

}  // namespace gradcomm::comm
