#include "comm/exchange/exchange_transport.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <vector>

#include "comm/group.hpp"
#include "comm/p2p_group.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"
#include "kernels/reduce/reduce.hpp"

namespace gradcomm::comm {

namespace {

constexpr size_t kPieceBytes = kExchangePieceBytes;  // phase by phase: bytes of a piece
constexpr size_t kPiecesAhead = 2;  // pipelined all-reduce: pieces sent ahead of the one reduced
constexpr size_t kMinReduceRun = size_t{64} << 10;  // bytes of a slice reduced at a time while receiving
constexpr size_t kWindowBytes = size_t{512} << 20;  // pipelined all-reduce: bytes planned at a time

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

// One slice reduced while its inputs arrive: in rank order (the local transport's
// math), in runs of at least kMinReduceRun, so the reduction overlaps the transfer.
struct ArrivingSlice {
  const void* const* inputs;  // per rank, the slice's input
  int ranks;
  size_t total;  // elements
  gcommDataType_t dtype;
  gcommRedOp_t op;
  char* out;
  size_t done = 0;  // elements reduced so far

  // `ready` elements have arrived from every rank: reduces them once there are
  // enough of them, or all. Whether the whole slice is reduced.
  bool reduce_upto(size_t ready) {
    if (ready < total && ready - done < kMinReduceRun / dtype_size(dtype)) return false;
    kernels::reduce_host::reduce_to_typed(inputs, ranks, done, ready - done, dtype, op,
                                          out + done * dtype_size(dtype));
    done = ready;
    return done == total;
  }
};

class ExchangeTransport final : public Transport, public P2PBatchRunner {
 public:
  ExchangeTransport(std::unique_ptr<PeerExchange> links, gcommTransport_t kind, double timeout_s)
      : links_(std::move(links)),
        kind_(kind),
        timeout_s_(timeout_s),
        sent_to_(links_->size()),
        received_from_(links_->size()) {}

  int rank() const noexcept override { return links_->rank(); }
  int size() const noexcept override { return links_->size(); }
  gcommDevice_t device() const noexcept override { return gcommHostDevice(); }
  gcommTransport_t kind() const noexcept override { return kind_; }
  std::optional<uint64_t> payload_bytes_sent() const noexcept override {
    return links_->payload_bytes_sent();
  }
  bool other_threads_may_call() const noexcept override { return links_->other_threads_may_call(); }
  bool waited_on_ns(int q, uint64_t& ns) const noexcept override { return links_->waited_on_ns(q, ns); }

  void run(const CollectiveArgs& a) override {
    if (is_p2p(a.op)) {
      if (!defer_p2p_to_group_end(this, a)) run_p2p_batch({a}, false);
      return;
    }
    const std::string what = cat(call_id(a));
    refuse_if_broken(what);
    tag_.sig = CallSignature{a.op, a.op == Collective::kBarrier ? 0 : a.count, a.dtype, a.redop, a.root};
    tag_.seq = a.seq;
    tag_.phase = 0;
    deadline_ = deadline_after(timeout_s_);
    try {
      switch (a.op) {
        case Collective::kAllReduce:
          all_reduce(a, what);
          break;
        case Collective::kReduceScatter:
          reduce_scatter(a, what);
          break;
        case Collective::kReduce:
          reduce(a, what);
          break;
        case Collective::kBroadcast:
          broadcast(a, what);
          break;
        case Collective::kAllGather:
          all_gather(a, what);
          break;
        case Collective::kAllToAll:
          all_to_all(a, what);
          break;
        case Collective::kBarrier: {
          std::vector<PeerTransfer> t(size());
          for (auto& x : t) x.sends = x.receives = true;
          phase(t, what);
          break;
        }
        case Collective::kSend:
        case Collective::kRecv:
          break;  // run_p2p_batch
      }
    } catch (const Error& e) {
      break_links(e);
      throw;
    } catch (...) {  // std::bad_alloc too: the streams are as out of step
      break_links(as_error(std::current_exception()));
      throw;
    }
  }

  // Every peer's messages at once (SocketLinks::run_messages), each pair's in call
  // order; a send to this rank itself meets its receive here, in order.
  void run_p2p_batch(const std::vector<CollectiveArgs>& calls, bool grouped) override {
    const std::string what = calls.size() == 1 ? cat(call_id(calls[0]))
                                               : cat("a group of ", calls.size(),
                                                     " sends and receives, the first ", call_id(calls[0]));
    refuse_if_broken(what);
    std::vector<PeerQueue> queues(n());
    std::vector<const CollectiveArgs*> to_self, from_self;
    std::string self_error;
    try {  // the pair counters move on here: a failure from now on is the peers' to hear
      queue_p2p(calls, queues, to_self, from_self);
      self_error = copy_to_self(to_self, from_self);
    } catch (...) {
      break_links(as_error(std::current_exception()));
      throw;
    }
    try {
      if (n() > 1) links_->run_messages(queues, deadline_after(timeout_s_), what);
    } catch (const Error& e) {
      break_links(e);
      if (e.status() == gcommTimeout && !grouped)
        fail(gcommTimeout, e.message(),
             "; outside a group a send larger than the connection's buffers waits for its "
             "receive: two ranks that send to each other first need a group (gcommGroupStart/End)");
      throw;
    } catch (...) {
      break_links(as_error(std::current_exception()));
      throw;
    }
    if (!self_error.empty()) fail(gcommInvalidArgument, self_error);
  }

  // Each call's message in its peer's queue, numbered per pair and direction; the
  // calls with this rank itself in to_self and from_self.
  void queue_p2p(const std::vector<CollectiveArgs>& calls, std::vector<PeerQueue>& queues,
                 std::vector<const CollectiveArgs*>& to_self, std::vector<const CollectiveArgs*>& from_self) {
    for (const CollectiveArgs& c : calls) {
      const bool send = c.op == Collective::kSend;
      const int q = c.root;
      if (q == me()) {
        (send ? to_self : from_self).push_back(&c);
        continue;
      }
      // The header names the send, as both ends see it: count, dtype, receiver,
      // and how many messages the pair exchanged that way before.
      PhaseTag tag;
      tag.sig = CallSignature{Collective::kSend, c.count, c.dtype, gcommSum, send ? q : me()};
      const size_t bytes = c.count * dtype_size(c.dtype);
      if (send) {
        tag.seq = sent_to_[q]++;
        queues[q].out.push_back(OutMessage{c.send, bytes, tag});
      } else {
        tag.seq = received_from_[q]++;
        queues[q].in.push_back(InMessage{c.recv, bytes, tag});
      }
    }
  }

  // The group's sends to this rank meet its receives from itself in order; the
  // first mismatch, or "" (the streams are not involved: the communicator stays usable).
  static std::string copy_to_self(const std::vector<const CollectiveArgs*>& sends,
                                  const std::vector<const CollectiveArgs*>& recvs) {
    std::string error;
    for (size_t i = 0; i < std::min(sends.size(), recvs.size()); ++i) {
      const CollectiveArgs& s = *sends[i];
      const CollectiveArgs& r = *recvs[i];
      if (s.count != r.count || s.dtype != r.dtype) {
        if (error.empty())
          error = cat(call_id(r), " (", r.count, " elements of ", dtype_name(r.dtype), ") does not match ",
                      call_id(s), " (", s.count, " elements of ", dtype_name(s.dtype), ")");
        continue;
      }
      const size_t bytes = s.count * dtype_size(s.dtype);
      if (bytes > 0 && r.recv != s.send) std::memmove(r.recv, s.send, bytes);
    }
    if (error.empty() && sends.size() != recvs.size())
      error = cat("the group has ", sends.size(), " send(s) to this rank itself and ", recvs.size(),
                  " receive(s) from it: each send to itself needs a receive from itself in the same group");
    return error;
  }

  void refuse_if_broken(const std::string& what) const {
    if (!broken_.empty())
      fail(gcommInvalidState, what,
           ": the connections to the other ranks are out of step since an earlier "
           "failure (",
           broken_, "); destroy this communicator");
  }

  // The streams may hold half a message: nothing more can go through them.
  // Closing them (after telling the peers why) makes the peers fail now,
  // naming the cause, instead of at their timeout. Telling them may take up to
  // a second, except after a timeout: the call fails at its timeout, and the
  // notice goes only where the socket takes it at once (a peer that let the
  // time run out is not reading what it was sent).
  void break_links(const Error& e) {
    broken_ = e.message();
    failed_.store(true);
    links_->fail_all(e.message(), e.status() == gcommTimeout ? 0.0 : 1.0);
  }

  // Failures surface in run(), which is bounded by the timeout; this only says
  // whether one happened (the shutdown barrier is skipped after one).
  gcommStatus_t poll_async_error(std::string& message) noexcept override {
    if (!failed_.load()) return gcommSuccess;
    message = cat("rank ", rank(), "'s connections to the other ranks failed");
    return gcommRemoteError;
  }

  void abort() noexcept override { links_->abort(); }

 private:
  int n() const { return size(); }
  int me() const { return rank(); }

  void phase(std::vector<PeerTransfer>& t, const std::string& what,
             const std::function<void()>& progress = {}) {
    if (n() > 1) links_->run_phase(t, tag_, deadline_, what, progress);
    ++tag_.phase;
  }

  // Elements per piece: a multiple of n so that every rank's slice is alike.
  size_t piece_elems(gcommDataType_t dtype) const {
    size_t e = std::max<size_t>(kPieceBytes / dtype_size(dtype), 1);
    return std::max<size_t>(e / n() * n(), n());
  }
  // The pipelined all-reduce's piece: n slices of the wire's pipelined_slice_bytes.
  size_t pipelined_piece_elems(gcommDataType_t dtype) const {
    return std::max<size_t>(links_->pipelined_slice_bytes() / dtype_size(dtype), 1) * n();
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
  void reduce_slices(const CollectiveArgs& a, const char* send, const Slices& s, void* out,
                     const std::string& what) {
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
    ArrivingSlice slice{inputs.data(), n(), s.length[me()], a.dtype, a.redop, static_cast<char*>(out)};
    phase(t, what, [&] {
      size_t ready = slice.total;
      for (int q = 0; q < n(); ++q)
        if (q != me()) ready = std::min(ready, links_->received_bytes(q) / es);
      slice.reduce_upto(ready);
    });
    slice.reduce_upto(slice.total);
  }

  // Phase "all-gather the slices of buf": this rank's slice to everyone, rank q's into slice q.
  void gather_slices(char* buf, size_t es, const Slices& s, const std::string& what) {
    std::vector<PeerTransfer> t(n());
    for (int q = 0; q < n(); ++q)
      if (q != me())
        t[q] = PeerTransfer{buf + s.offset[me()] * es, s.length[me()] * es, true,
                            buf + s.offset[q] * es,    s.length[q] * es,    true};
    phase(t, what);
  }

  void all_reduce(const CollectiveArgs& a, const std::string& what) {
    if (n() > 1 && links_->runs_gated_messages()) return all_reduce_pipelined(a, what);
    const size_t es = dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.send);
    char* recv = static_cast<char*>(a.recv);
    for_each_piece(a.count, piece_elems(a.dtype), [&](size_t first, size_t m) {
      Slices s(first, m, n());
      reduce_slices(a, send, s, recv + s.offset[me()] * es, what);
      gather_slices(recv, es, s, what);
    });
  }

  // The same two phases per piece and the same bits, as one run of messages per
  // peer in which later pieces' slices go out while a piece is reduced: to every
  // peer q, slice q of pieces 0, 1 and 2, then this rank's reduced slice of piece 0
  // (held until it is reduced), slice q of piece 3, the reduced slice of piece 1,
  // and so on, kPiecesAhead pieces ahead. Phase by phase, each phase ended with its
  // slowest flow while the link idled and the next phase waited; here another
  // piece's data is queued behind it (4 ranks on a 1 Gbit lab link: 0.93x the
  // time at 64 MiB, docs/benchmarks.md). The pieces are small (the wire's
  // pipelined_slice_bytes to each peer): a rank's flows to its peers share its
  // link unevenly, and a flow can run at most kPiecesAhead slices ahead of the
  // slowest (a receiver holds later slices until it has reduced), so that lag, the
  // tail the last piece waits for, is a few slices, not megabytes. The pieces are
  // planned kWindowBytes at a time (one run each), so what a call keeps is bounded
  // whatever its count: an absurd count moves its first bytes at once and fails at
  // its timeout instead of listing millions of pieces first (issue 44 #7).
  void all_reduce_pipelined(const CollectiveArgs& a, const std::string& what) {
    const size_t step = pipelined_piece_elems(a.dtype);
    const size_t pieces = std::max<size_t>(1, a.count / step + (a.count % step != 0 ? 1 : 0));
    const size_t window = std::max<size_t>(1, kWindowBytes / (step * dtype_size(a.dtype)));
    for (size_t first = 0; first < pieces; first += window)
      pipeline_pieces(a, first, std::min(window, pieces - first), step, what);
    tag_.phase += static_cast<uint32_t>(2 * pieces);
  }

  // Pieces [first, first + count) of the all-reduce as one gated run. kPiecesAhead
  // + 1 pieces' slices are staged: piece k's wait (the gate) until piece
  // k - kPiecesAhead - 1 is reduced.
  void pipeline_pieces(const CollectiveArgs& a, size_t first, size_t count, size_t step,
                       const std::string& what) {
    const size_t es = dtype_size(a.dtype);
    const char* send = static_cast<const char*>(a.send);
    char* recv = static_cast<char*>(a.recv);
    std::vector<Slices> pieces;  // piece first + k, for k < count
    pieces.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      const size_t begin = (first + k) * step;
      pieces.emplace_back(begin, std::min(step, a.count - begin), n());
    }
    const size_t longest = pieces[0].longest;
    const size_t ahead = kPiecesAhead, slots = std::min(count, ahead + 1);
    char* staging = scratch(slots * static_cast<size_t>(n()) * longest * es);
    auto slot = [&](size_t k, int q) { return staging + ((k % slots) * n() + q) * longest * es; };
    auto reduced_slice = [&](size_t k, int q) { return recv + pieces[k].offset[q] * es; };
    auto tag = [&](size_t k, uint32_t which) {
      PhaseTag t = tag_;
      t.phase = tag_.phase + static_cast<uint32_t>(2 * (first + k)) + which;
      return t;
    };
    std::vector<PeerQueue> queues(n());
    std::vector<size_t> slices_at(count);  // where piece k's slices are in each peer's queue
    for (int q = 0; q < n(); ++q) {
      if (q == me()) continue;
      PeerQueue& p = queues[q];
      auto gather = [&](size_t k) {
        p.out.push_back(OutMessage{reduced_slice(k, me()), pieces[k].length[me()] * es, tag(k, 1), k + 1});
        p.in.push_back(InMessage{reduced_slice(k, q), pieces[k].length[q] * es, tag(k, 1), 0});
      };
      for (size_t k = 0; k < count; ++k) {
        slices_at[k] = p.in.size();
        p.out.push_back(OutMessage{send + pieces[k].offset[q] * es, pieces[k].length[q] * es, tag(k, 0), 0});
        p.in.push_back(
            InMessage{slot(k, q), pieces[k].length[me()] * es, tag(k, 0), k > ahead ? k - ahead : 0});
        if (k >= ahead) gather(k - ahead);
      }
      for (size_t k = count > ahead ? count - ahead : 0; k < count; ++k) gather(k);
    }
    // The gate: pieces reduced so far. Each is reduced as its slices arrive.
    size_t reduced = 0;
    std::vector<const void*> inputs(n());
    auto start_piece = [&](size_t k) {
      for (int q = 0; q < n(); ++q) inputs[q] = q == me() ? send + pieces[k].offset[me()] * es : slot(k, q);
      return ArrivingSlice{inputs.data(), n(),     pieces[k].length[me()],
                           a.dtype,       a.redop, reduced_slice(k, me())};
    };
    ArrivingSlice slice = start_piece(0);
    auto progress = [&] {
      while (reduced < count) {
        size_t ready = slice.total;
        for (int q = 0; q < n(); ++q) {
          if (q == me()) continue;
          const size_t got = links_->messages_received(q), at = slices_at[reduced];
          ready = std::min(ready, got > at ? slice.total : got == at ? links_->received_bytes(q) / es : 0);
        }
        if (!slice.reduce_upto(ready)) return;
        if (++reduced < count) slice = start_piece(reduced);
      }
    };
    links_->run_gated_messages(queues, reduced, deadline_, what, progress);
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
        if (root)
          t[q] = PeerTransfer{nullptr, 0, false, recv + s.offset[q] * es, s.length[q] * es, true};
        else if (q == a.root)
          t[q] = PeerTransfer{reduced_.data(), s.length[me()] * es, true, nullptr, 0, false};
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
        if (root)
          t[q] = PeerTransfer{recv + s.offset[q] * es, s.length[q] * es, true, nullptr, 0, false};
        else if (q == a.root)
          t[q] = PeerTransfer{nullptr, 0, false, recv + s.offset[me()] * es, s.length[me()] * es, true};
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
      if (q != me())
        t[q] = PeerTransfer{own, block, true, recv + static_cast<size_t>(q) * block, block, true};
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

  std::unique_ptr<PeerExchange> links_;
  gcommTransport_t kind_;
  double timeout_s_;
  PhaseTag tag_;
  Deadline deadline_{};
  std::vector<char> scratch_;                      // the slices received for a reduction
  std::vector<char> reduced_;                      // reduce: this rank's reduced slice, for the root
  std::vector<uint64_t> sent_to_, received_from_;  // messages per peer so far (the p2p header's seq)
  std::string broken_;               // why the streams cannot be used any more ("" while usable)
  std::atomic<bool> failed_{false};  // broken_ is set (readable from any thread)
};

}  // namespace

std::unique_ptr<Transport> make_exchange_transport(std::unique_ptr<PeerExchange> links, gcommTransport_t kind,
                                                   double timeout_s) {
  return std::make_unique<ExchangeTransport>(std::move(links), kind, timeout_s);
}

}  // namespace gradcomm::comm
