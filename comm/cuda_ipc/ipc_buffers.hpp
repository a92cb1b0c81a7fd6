// Device memory read across the processes of a cuda-ipc job (comm/cuda_ipc/
// cuda_ipc_transport.hpp). A rank describes a pointer by its allocation's IPC
// handle and the offset into it (SharedBuffer, sent to the peers with each call);
// a peer opens the allocation once and keeps it open (PeerBuffers), since
// gradient buckets and caching allocators hand out the same blocks step after step.
//
// The driver gives every allocation an id that no later allocation of the process
// reuses (CU_POINTER_ATTRIBUTE_BUFFER_ID), and cudaIpcGetMemHandle gives a new
// handle to memory allocated again at a freed address; so a peer's (rank, id)
// names one allocation for good, and an id it has not seen at an address it holds
// open means the old allocation is gone: it is closed, then the new one opened.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gradcomm::comm::cuda_ipc {

// A pointer as another process of the job can open it. Plain bytes: it travels in
// the host messages of the control plane.
struct SharedBuffer {
  cudaIpcMemHandle_t handle{};  // of the allocation holding the pointer
  uint64_t buffer_id = 0;       // 0: no buffer (a null pointer or nothing to share)
  uint64_t base = 0;            // the allocation's address in its own process
  uint64_t bytes = 0;           // the allocation's size
  uint64_t offset = 0;          // of the pointer in the allocation
};

// This process's side: describes its pointers (a driver query each, the handle
// cached per allocation).
class BufferExports {
 public:
  // Throws gcommInvalidArgument when `ptr` is not in memory cudaIpcGetMemHandle can
  // share (cudaMalloc'd device memory; not cudaMallocAsync pools, cuMemCreate or
  // PyTorch's expandable segments, not host or managed memory). `what` names it.
  SharedBuffer share(const void* ptr, const char* what);

 private:
  std::unordered_map<uint64_t, cudaIpcMemHandle_t> handles_;  // by buffer id
};

// Peers' allocations opened in this process, on the communicator's device.
class PeerBuffers {
 public:
  PeerBuffers() = default;
  ~PeerBuffers();  // closes every mapping; the caller has waited for the work that used them
  PeerBuffers(const PeerBuffers&) = delete;
  PeerBuffers& operator=(const PeerBuffers&) = delete;

  // The address in this process of rank `peer`'s `b` (nullptr for an empty `b`).
  // Opens the allocation on first use; an allocation of that peer it replaced is
  // closed first, after this process's device work is done (it may still read it).
  void* open(int peer, const SharedBuffer& b);
  size_t open_count() const { return mappings_.size(); }

  // At most this many allocations stay open; past it, the least recently used half
  // is closed (after this process's device work is done). An allocation its owner
  // freed stays mapped here, holding its memory, until then or until a new one of
  // that peer overlaps its addresses.
  static constexpr size_t kMaxOpen = 256;

  // Closes rank `peer`'s allocation `buffer_id` if open; the caller has waited for
  // this process's work that read it.
  void close(int peer, uint64_t buffer_id);

 private:
  struct Mapping {
    int peer;
    uint64_t buffer_id;
    uint64_t base, bytes;  // in the peer's process
    char* local;           // where it is open here
    uint64_t last_use;
  };
  void close_where(const std::vector<size_t>& indices);
  std::vector<Mapping> mappings_;
  uint64_t uses_ = 0;
};

}  // namespace gradcomm::comm::cuda_ipc
