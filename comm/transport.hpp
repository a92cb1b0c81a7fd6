// The transport interface: what moves bytes between ranks. One implementation
// per folder (comm/nccl/, comm/local/, comm/socket/, comm/mpi/; socket and MPI
// share comm/exchange/), listed in comm/transports.cpp. The Communicator (comm/communicator.hpp)
// owns a Transport and adds what every transport shares: argument validation,
// sequence numbers, the watchdog, abort state and the C API.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "gradcomm/comm.h"

namespace gradcomm::comm {

// Every call a communicator makes. kSend and kRecv are point-to-point
// (gcommSend/gcommRecv): only the two ranks take part, and they are numbered
// apart from the collectives (see CollectiveArgs::seq). The values are on the
// socket transport's wire: new ones go at the end.
enum class Collective {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBarrier,
  kSend,
  kRecv
};
constexpr Collective kLastCall = Collective::kRecv;
const char* collective_name(Collective op) noexcept;
// All-reduce, reduce and reduce-scatter: the calls whose reduction op matters.
bool is_reduction(Collective op) noexcept;
// Send and receive.
inline bool is_p2p(Collective op) noexcept {
  return op == Collective::kSend || op == Collective::kRecv;
}

// One collective call, already validated by the Communicator.
struct CollectiveArgs {
  Collective op = Collective::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // all-reduce/broadcast/reduce: elements; all-gather: sendcount; reduce-scatter:
                     // recvcount; all-to-all: elements per peer block
  gcommDataType_t dtype = gcommFloat32;
  gcommRedOp_t redop = gcommSum;
  int root = 0;  // broadcast and reduce: the root; send and receive: the peer
  gcommStream_t stream = nullptr;
  // Per-communicator number, for messages and the flight record: collectives
  // count collectives (every rank agrees on it), send and receive count this
  // rank's point-to-point calls (ranks differ: only pairs take part).
  uint64_t seq = 0;
  // The caller owns both buffers and checked where they live (the reducer's
  // buckets): the communicator does not ask the driver again. NULL checks stay.
  bool buffers_known = false;
};

// One call's arguments (`count` as above); the communicator validates them.
CollectiveArgs collective_call(Collective op, const void* send, void* recv, size_t count,
                               gcommDataType_t dtype, gcommStream_t stream, gcommRedOp_t redop = gcommSum,
                               int root = 0);
// A send (buffer in `send`) or receive (in `recv`) of `count` elements with `peer`.
CollectiveArgs p2p_call(Collective op, const void* buffer, size_t count, gcommDataType_t dtype, int peer,
                        gcommStream_t stream);
// A call on buffers the caller owns and has already checked (the reducer's
// buckets and registered gradients): buffers_known is set.
CollectiveArgs owned_buffers_call(Collective op, const void* send, void* recv, size_t count,
                                  gcommDataType_t dtype, gcommStream_t stream, gcommRedOp_t redop = gcommSum,
                                  int root = 0);

// What every rank must agree on for one collective.
struct CallSignature {
  Collective op = Collective::kBarrier;
  size_t count = 0;
  gcommDataType_t dtype = gcommFloat32;
  gcommRedOp_t redop = gcommSum;
  int root = 0;
  bool operator==(const CallSignature& o) const {
    return op == o.op && count == o.count && dtype == o.dtype && redop == o.redop && root == o.root;
  }
};
std::string describe(const CallSignature& s);

// "all-reduce #7 of 4096 bytes": names a call in messages. Formatted only when a
// message needs it (a string per call costs a visible share of a small collective).
std::string call_name(Collective op, uint64_t seq, size_t bytes);

// The same name as a value: transports pass it down to where a message may be
// needed and print it there (`cat(id, ...)`), so a call that succeeds formats nothing.
struct CallId {
  Collective op = Collective::kBarrier;
  uint64_t seq = 0;
  size_t bytes = 0;
  int peer = -1;  // send and receive: "to rank 1" / "from rank 1"
};
CallId call_id(const CollectiveArgs& a) noexcept;
std::ostream& operator<<(std::ostream& os, const CallId& id);

// A transport is driven by one thread at a time (its rank's thread).
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual gcommDevice_t device() const noexcept = 0;
  virtual gcommTransport_t kind() const noexcept = 0;

  // Host transports run the collective to completion (bounded by the timeout;
  // throw gcommTimeout naming the ranks that did not arrive). CUDA transports
  // enqueue it on args.stream and return.
  // Send and receive: the k-th send from rank r to rank q matches q's k-th
  // receive from r. Inside a group they progress together (a ring of
  // send-then-receive completes), as NCCL's do: host transports keep them for
  // the group's end (comm/p2p_group.hpp), NCCL's group launches them there.
  virtual void run(const CollectiveArgs& args) = 0;

  // After this thread's group ended (comm/group.hpp): returns once the calls
  // this transport made in the group are enqueued (a non-blocking NCCL
  // communicator may still be enqueueing them); throws on failure or at the
  // deadline. Transports that run calls at once have nothing to wait for.
  virtual void wait_group_launched(std::chrono::steady_clock::time_point /*deadline*/) {}

  // Called before each run() made inside a group (comm/group.hpp): a transport
  // whose grouped calls launch only at the group's end (NCCL) opens its own
  // group here, once per thread, with join_transport_group. Others run at once.
  virtual void join_group() {}

  // Payload bytes this rank has written to its connections to other ranks since
  // creation (protocol headers excluded), for transports that can count them
  // (the socket transport); nullopt for the others (shared memory, NCCL).
  virtual std::optional<uint64_t> payload_bytes_sent() const noexcept { return std::nullopt; }

  // Nanoseconds this rank's collectives have waited on rank q since creation
  // (for a late peer's data, or for a peer to take this rank's): the link part
  // of straggler attribution. False for transports that cannot tell (local,
  // NCCL, cuda-ipc, MPI).
  virtual bool waited_on_ns(int /*q*/, uint64_t& /*ns*/) const noexcept { return false; }

  // Whether a thread other than the application's may run this transport's
  // calls (one at a time): only then does a host communicator get a lane
  // (comm/host_lane.hpp) that runs the reducers' collectives on its own thread.
  // MPI below MPI_THREAD_MULTIPLE is called only from the threads the
  // application chose.
  virtual bool other_threads_may_call() const noexcept { return true; }

  // Non-blocking poll for an asynchronous failure (NCCL async error, a peer that
  // aborted). gcommSuccess if healthy; otherwise fills `message`.
  virtual gcommStatus_t poll_async_error(std::string& message) noexcept = 0;

  // Makes every pending and later operation fail promptly (ncclCommAbort, wake
  // waiting local peers). Must be callable from another thread (the watchdog).
  virtual void abort() noexcept = 0;
};

}  // namespace gradcomm::comm
