#include "comm/socket/socket_transport.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/store_backed_transport.hpp"
#include "kernels/reduce/reduce.hpp"
#include "comm/socket/peer_links.hpp"
#include "comm/socket/peer_mesh.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

using namespace bootstrap;
using namespace net;
using sock::PeerLinks;
using sock::PeerTransfer;

namespace {

constexpr size_t kPieceBytes = size_t{8} << 20;
constexpr size_t kMinReduceRun = size_t{64} << 10;  // bytes of a slice reduced at a time while receiving

// Rank q's slice of `count` elements starting at `first`: [first + count*q/n, first + count*(q+1)/n).
struct Slices {
  std::vector<size_t> offset, length;
  size_t longest = 0;
  Slices(size_t first, size_t count, int n) : offset(n), length(n) {
    for (int q = 0; q < n; ++q) {
      offset[q] = first + count * q / n;
      length[q] = count * (q + 1) / n - count * q / n;
      longest = std::max(longest, length[q]);
    }
  }
};

class SocketTransport final : public Transport {
 public:
  SocketTransport(std::vector<Socket> peers, int rank, double timeout_s)
      : links_(std::move(peers), rank), timeout_s_(timeout_s) {}

  int rank() const noexcept override { return links_.rank(); }
  int size() const noexcept override { return links_.size(); }
  gcommDevice_t device() const noexcept override { return gcommHostDevice(); }
  gcommTransport_t kind() const noexcept override { return gcommTransportSocket; }
  std::optional<uint64_t> payload_bytes_sent() const noexcept override { return links_.payload_bytes_sent(); }

  void run(const CollectiveArgs& a) override {
    const std::string what = cat(call_id(a));
    if (!broken_.empty())
      fail(gcommInvalidState, what, ": the connections to the other ranks are out of step since an earlier "
           "failure (", broken_, "); destroy this communicator");
    tag_.sig = CallSignature{a.op, a.op == Collective::kBarrier ? 0 : a.count, a.dtype, a.redop, a.root};
    tag_.seq = a.seq;
    tag_.phase = 0;
    deadline_ = deadline_after(timeout_s_);
    try {
      switch (a.op) {
        case Collective::kAllReduce: all_reduce(a, what); break;
        case Collective::kReduceScatter: reduce_scatter(a, what); break;
        case Collective::kReduce: reduce(a, what); break;
        case Collective::kBroadcast: broadcast(a, what); break;
        case Collective::kAllGather: all_gather(a, what); break;
        case Collective::kAllToAll: all_to_all(a, what); break;
        case Collective::kBarrier: {
          std::vector<PeerTransfer> t(size());
          for (auto& x : t) x.sends = x.receives = true;
          phase(t, what);
          break;
        }
      }
    } catch (const Error& e) {
      // The streams may hold half a message: nothing more can go through them.
      // Closing them (after telling the peers why) makes the peers fail now,
      // naming the cause, instead of at their timeout.
      broken_ = e.message();
      failed_.store(true);
      links_.fail_all(e.message());
      throw;
    }
  }

  // Failures surface in run(), which is bounded by the timeout; this only says
  // whether one happened (the shutdown barrier is skipped after one).
  gcommStatus_t poll_async_error(std::string& message) noexcept override {
    if (!failed_.load()) return gcommSuccess;
    message = cat("rank ", rank(), "'s connections to the other ranks failed");
    return gcommRemoteError;
  }

  void abort() noexcept override { links_.abort(); }

 private:
  int n() const { return size(); }
  int me() const { return rank(); }

  void phase(std::vector<PeerTransfer>& t, const std::string& what, const std::function<void()>& progress = {}) {
    if (n() > 1) links_.run_phase(t, tag_, deadline_, what, progress);
    ++tag_.phase;
  }

  // Elements per piece: a multiple of n so that every rank's slice is alike.
  size_t piece_elems(gcommDataType_t dtype) const {
    size_t e = std::max<size_t>(kPieceBytes / dtype_size(dtype), 1);
    return std::max<size_t>(e / n() * n(), n());
  }

  // fn(first, m) for consecutive pieces [first, first + m) of `count` elements,
  // at most `step` each; once with m = 0 for an empty message, whose headers
  // still keep the ranks in step.
  template <class Fn>
  static void for_each_piece(size_t count, size_t step, Fn&& fn) {
    size_t first = 0;
    do {
      const size_t m = std::min(step, count - first);
      fn(first, m);
      first += m;
    } while (first < count);
  }

  char* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  // Phase "reduce my slice": slice q of `send` goes to rank q; this rank's slice
  // of every rank is reduced, in rank order, into `out` — as it arrives: whenever
  // the phase would wait for the network, the elements every peer has delivered
  // so far are reduced (in runs of at least kMinReduceRun), so the reduction
  // overlaps the transfer instead of following it.
  void reduce_slices(const CollectiveArgs& a, const char* send, const Slices& s, void* out, const std::string& what) {
    const size_t es = dtype_size(a.dtype);
    char* staging = scratch(static_cast<size_t>(n()) * s.longest * es);
    std::vector<PeerTransfer> t(n());
    std::vector<const void*> inputs(n());
    for (int q = 0; q < n(); ++q) {
      char* slot = staging + static_cast<size_t>(q) * s.longest * es;
      inputs[q] = q == me() ? send + s.offset[me()] * es : slot;
      if (q == me()) continue;
      t[q] = PeerTransfer{send + s.offset[q] * es, s.length[q] * es, true, slot, s.length[me()] * es, true};
    }
    const size_t total = s.length[me()];
    size_t done = 0;
    auto reduce_upto = [&](size_t upto) {
      kernels::reduce_host::reduce_to_typed(inputs.data(), n(), done, upto - done, a.dtype, a.redop,
                                  static_cast<char*>(out) + done * es);
      done = upto;
    };
    phase(t, what, [&] {
      size_t ready = total;
      for (int q = 0; q < n(); ++q)
        if (q != me()) ready = std::min(ready, links_.received_bytes(q) / es);
      if (ready - done >= kMinReduceRun / es) reduce_upto(ready);
    });
    if (done < total) reduce_upto(total);
  }

  // Phase "all-gather the slices of buf": this rank's slice to everyone, rank q's into slice q.
  void gather_slices(char* buf, size_t es, const Slices& s, const std::string& what) {
    std::vector<PeerTransfer> t(n());
    for (int q = 0; q < n(); ++q)
      if (q != me())
        t[q] = PeerTransfer{buf + s.offset[me()] * es, s.length[me()] * es, true, buf + s.offset[q] * es,
                            s.length[q] * es, true};
    phase(t, what);
  }

  void all_reduce(const CollectiveArgs& a, const std::string& what) {
    const size_t es = dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.send);
    char* recv = static_cast<char*>(a.recv);
    for_each_piece(a.count, piece_elems(a.dtype), [&](size_t first, size_t m) {
      Slices s(first, m, n());
      reduce_slices(a, send, s, recv + s.offset[me()] * es, what);
      gather_slices(recv, es, s, what);
    });
  }

  void reduce_scatter(const CollectiveArgs& a, const std::string& what) {
    const size_t es = dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.send);
    char* recv = static_cast<char*>(a.recv);
    for_each_piece(a.count, std::max<size_t>(kPieceBytes / es / n(), 1), [&](size_t first, size_t m) {
      Slices s(0, 0, n());
      for (int q = 0; q < n(); ++q) {
        s.offset[q] = q * a.count + first;
        s.length[q] = m;
      }
      s.longest = m;
      reduce_slices(a, send, s, recv + first * es, what);
    });
  }

  void reduce(const CollectiveArgs& a, const std::string& what) {
    const size_t es = dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.send);
    char* recv = static_cast<char*>(a.recv);
    const bool root = me() == a.root;
    for_each_piece(a.count, piece_elems(a.dtype), [&](size_t first, size_t m) {
      Slices s(first, m, n());
      // A non-root rank's reduced slice waits in reduced_ on its way to the root.
      if (!root && reduced_.size() < s.longest * es) reduced_.resize(s.longest * es);
      reduce_slices(a, send, s, root ? recv + s.offset[me()] * es : reduced_.data(), what);
      std::vector<PeerTransfer> t(n());
      for (int q = 0; q < n(); ++q) {
        if (q == me()) continue;
        if (root) t[q] = PeerTransfer{nullptr, 0, false, recv + s.offset[q] * es, s.length[q] * es, true};
        else if (q == a.root) t[q] = PeerTransfer{reduced_.data(), s.length[me()] * es, true, nullptr, 0, false};
      }
      phase(t, what);
    });
  }

  void broadcast(const CollectiveArgs& a, const std::string& what) {
    const size_t es = dtype_size(a.dtype);
    const bool root = me() == a.root;
    char* recv = static_cast<char*>(a.recv);
    const char* src = root ? static_cast<const char*>(a.send) : nullptr;
    if (root && recv != src && a.count > 0) std::memcpy(recv, src, a.count * es);
    for_each_piece(a.count, piece_elems(a.dtype), [&](size_t first, size_t m) {
      Slices s(first, m, n());
      // The root scatters the slices ...
      std::vector<PeerTransfer> t(n());
      for (int q = 0; q < n(); ++q) {
        if (q == me()) continue;
        if (root) t[q] = PeerTransfer{recv + s.offset[q] * es, s.length[q] * es, true, nullptr, 0, false};
        else if (q == a.root) t[q] = PeerTransfer{nullptr, 0, false, recv + s.offset[me()] * es, s.length[me()] * es, true};
      }
      phase(t, what);
      // ... and every rank passes its slice to the others but the root, which has them all.
      std::vector<PeerTransfer> g(n());
      for (int q = 0; q < n(); ++q) {
        if (q == me()) continue;
        if (q != a.root) {
          g[q].out = recv + s.offset[me()] * es;
          g[q].out_bytes = s.length[me()] * es;
          g[q].sends = true;
        }
        if (!root) {
          g[q].in = recv + s.offset[q] * es;
          g[q].in_bytes = s.length[q] * es;
          g[q].receives = true;
        }
      }
      phase(g, what);
    });
  }

  void all_gather(const CollectiveArgs& a, const std::string& what) {
    const size_t block = a.count * dtype_size(a.dtype);
    char* recv = static_cast<char*>(a.recv);
    char* own = recv + static_cast<size_t>(me()) * block;
    if (own != a.send && block > 0) std::memcpy(own, a.send, block);
    std::vector<PeerTransfer> t(n());
    for (int q = 0; q < n(); ++q)
      if (q != me()) t[q] = PeerTransfer{own, block, true, recv + static_cast<size_t>(q) * block, block, true};
    phase(t, what);
  }

  // One phase: block q of the input to rank q, rank q's block into block q of the
  // output, with every peer at once (the links run each transfer both ways).
  void all_to_all(const CollectiveArgs& a, const std::string& what) {
    const size_t block = a.count * dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.send);
    char* recv = static_cast<char*>(a.recv);
    const size_t mine = static_cast<size_t>(me()) * block;
    if (block > 0) std::memcpy(recv + mine, send + mine, block);
    std::vector<PeerTransfer> t(n());
    for (int q = 0; q < n(); ++q)
      if (q != me()) {
        const size_t at = static_cast<size_t>(q) * block;
        t[q] = PeerTransfer{send + at, block, true, recv + at, block, true};
      }
    phase(t, what);
  }

  PeerLinks links_;
  double timeout_s_;
  sock::PhaseTag tag_;
  Deadline deadline_{};
  std::vector<char> scratch_;  // the slices received for a reduction
  std::vector<char> reduced_;  // reduce: this rank's reduced slice, for the root
  std::string broken_;  // why the streams cannot be used any more ("" while usable)
  std::atomic<bool> failed_{false};  // broken_ is set (readable from any thread)
};

}  // namespace

std::unique_ptr<Transport> make_socket_transport_from_store(const LaunchConfig& launch) {
  auto boot = std::make_unique<Bootstrap>(rendezvous_options(launch));
  throw_if_any_failed(boot->meet(RankReport{}), launch.rank);
  return finish_store_init(std::move(boot), launch, "socket", [&](Bootstrap& met) -> std::unique_ptr<Transport> {
    std::vector<Socket> peers = sock::connect_peer_mesh(met, launch.master_addr, launch.job_key);
    return std::make_unique<SocketTransport>(std::move(peers), launch.rank, launch.timeout_s);
  });
}

}  // namespace gradcomm::comm
