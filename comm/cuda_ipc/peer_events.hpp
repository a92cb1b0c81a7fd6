// The interprocess events of a cuda-ipc rank (comm/cuda_ipc/cuda_ipc_transport.hpp):
// its own, which its streams record and whose handles the peers get, and the
// peers', opened here once and kept. Collectives use three per rank. Sends and
// receives use one per ordered pair of ranks and letter slot, both made on first
// use: the k-th letter from a rank to another uses slot k % kMaxLettersPerPeer for
// the sender's "ready" event and the receiver's "copied" event, so a slot is
// recorded again only once the letter kMaxLettersPerPeer earlier is settled on both
// sides (a group holds at most that many sends to one peer).
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <tuple>
#include <vector>

#include "comm/peer_memory/peer_memory_collective.hpp"

namespace gradcomm::comm::cuda_ipc {

class PeerEvents {
 public:
  using Point = PeerMemory::Point;                 // of a collective
  enum LetterEvent { kSendReady, kCopied };        // of a send
  static constexpr int kMaxLettersPerPeer = 1024;  // events made only as slots are used

  // Creates this rank's collective events on the current device.
  PeerEvents(int rank, int n);
  ~PeerEvents();  // destroys own events; opened ones need no destroy but are closed with it
  PeerEvents(const PeerEvents&) = delete;
  PeerEvents& operator=(const PeerEvents&) = delete;

  cudaIpcEventHandle_t own_collective_handle(Point p) const;
  // The three handles of rank `peer`, in Point order.
  void open_collective(int peer, const cudaIpcEventHandle_t* handles);
  cudaEvent_t collective(int rank, Point p) const { return collective_[3 * static_cast<size_t>(rank) + p]; }

  // This rank's event for its letter to (kSendReady) or from (kCopied) `peer` in
  // `slot`, made on first use; `*handle` is set to its handle for the peer.
  cudaEvent_t own_letter_event(LetterEvent kind, int peer, int slot, cudaIpcEventHandle_t* handle);
  // Rank `peer`'s letter event with `handle` in `slot`, opened on first use (kind:
  // its kSendReady when `copied` is false, its kCopied when true).
  cudaEvent_t peer_letter_event(int peer, int slot, const cudaIpcEventHandle_t& handle, bool copied = false);

 private:
  struct Own {
    cudaEvent_t event;
    cudaIpcEventHandle_t handle;
  };
  const int rank_;
  std::vector<cudaEvent_t> collective_;  // [rank * 3 + point]: own at rank_, opened elsewhere
  std::vector<cudaIpcEventHandle_t> own_handles_;
  std::map<std::tuple<int, int, int>, Own> own_letters_;     // (kind, peer, slot)
  std::map<std::tuple<int, int, int>, cudaEvent_t> opened_;  // (peer, copied, slot)
};

}  // namespace gradcomm::comm::cuda_ipc
