// The collective of ranks that read each other's buffers in place: the local
// transport's threads (host or one GPU) and the cuda-ipc transport's processes
// (one GPU, through CUDA IPC). Written once, here; each transport is a backend
// that answers four questions (PeerMemory): share my buffers and meet, open a
// peer's, order my stream after theirs, settle. So the algorithm cuda-ipc runs
// is the one the local transport's tests prove on every machine.
//
// A call, on every rank:
//   1. share_and_meet: this rank's call, input and all-reduce scratch are posted;
//      every rank's are checked alike (a mismatch fails every rank the same way).
//   2. phase one, in its own try: open the peers' inputs, wait for them to be
//      ready (GPU: each rank's kReady, and its kDone of the call before, since
//      the scratch it read is rewritten), then this rank's share of the reading:
//      an all-reduce reduces slice `rank` (rank_slice) of the piece into its
//      scratch as float; the other collectives copy or reduce straight into recv.
//   3. settle: every rank has done (host) or enqueued (GPU) phase one; a rank that
//      failed in it fails every rank (gcommRemoteError naming it) instead of
//      leaving them to read what it never wrote.
//   4. wait for every rank's kComputed (GPU: this rank's stream goes on only once
//      every rank has read its buffers); phase two (all-reduce): convert every
//      rank's slice to the dtype into recv, then record kDone. The host goes piece
//      by piece (steps 2-4 per piece, scratch halves alternating), so no count
//      sizes the scratch.
// No meeting ends a call: the next call's share_and_meet is the one a rank needs
// before it reuses what the peers read (its scratch, its events: a rank records a
// point again only after the meeting that follows every peer's wait on it).
// The reduction order is rank order for every element, so the bits equal the
// host transports'.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "comm/transport.hpp"

namespace gradcomm::comm {

// Rank r's share [lo, hi) of `count` elements in a reduction's two phases.
inline void rank_slice(size_t count, int nranks, int r, size_t& lo, size_t& hi) {
  lo = count * r / nranks;
  hi = count * (r + 1) / nranks;
}

// What a transport gives the collective (one object per rank).
class PeerMemory {
 public:
  // The points of a call a rank's stream records and the peers' streams wait for (GPU).
  enum Point { kReady, kComputed, kDone };

  virtual ~PeerMemory() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual bool on_gpu() const noexcept = 0;

  // Elements of an all-reduce of `count` done per round of steps 2-4 (all of them on a GPU).
  virtual size_t all_reduce_piece(size_t count) const = 0;
  // Step 1: readies this rank's scratch for pieces of `piece` elements, records its
  // kReady, posts its call and waits for every rank's; throws alike on every rank
  // if they differ. After it, every rank has finished the call before on the host.
  virtual void share_and_meet(const CollectiveArgs& a, size_t piece, const CallId& what) = 0;
  // After share_and_meet (may throw on this rank alone): rank q's input (this
  // rank's own is a.send), and where rank q's float slice of piece k lives.
  virtual const void* input_of(int q) = 0;
  virtual float* scratch_of(int q, size_t k) = 0;
  // Rank q's event for a point (GPU only).
  virtual cudaEvent_t event(int q, Point p) const = 0;
  // Step 3: `failed` is this rank's failure in phase one (thrown after the meeting).
  virtual void settle(const CallId& what, const Error* failed) = 0;
};

// Runs collective `a` (not a send or receive) over `peers`: on the host to
// completion, on a GPU enqueued on a.stream.
void run_peer_memory_collective(PeerMemory& peers, const CollectiveArgs& a);

}  // namespace gradcomm::comm
