/*
 * gradcomm communicators: rendezvous, the NCCL, local and socket transports, collectives,
 * timeouts and abort.
 *
 * Thread and stream contract:
 *  - A communicator is used by one thread at a time (like an NCCL communicator).
 *    A collective called while another thread is inside one on the same
 *    communicator fails it (gcommInvalidState, naming the misuse) and aborts its
 *    transport, so every rank fails: the ranks' calls could no longer be paired.
 *    The N communicators of gcommCommInitLocal are each driven by their own thread
 *    (a host collective returns only when every rank's thread has called it).
 *    A reducer on a host communicator runs its buckets' collectives on the
 *    communicator's own thread; a collective called meanwhile waits for them,
 *    so the calls still reach the transport one at a time, in program order.
 *  - Collectives on a CUDA communicator are enqueued on the caller's stream and
 *    return without waiting (like NCCL). Collectives on a host communicator run
 *    to completion before returning; the stream is ignored.
 *  - Every collective has a timeout (config timeout_s, else GRADCOMM_TIMEOUT_S, else
 *    300 s). A watchdog aborts a communicator whose collective does not complete in
 *    time or whose NCCL reports an asynchronous error; from then on every call
 *    returns gcommTimeout, gcommAborted or gcommRemoteError with a message naming
 *    the operation, its size and its sequence number. Destroy always works.
 */
#ifndef GRADCOMM_COMM_H
#define GRADCOMM_COMM_H

#include "gradcomm/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which transport moves the bytes. */
typedef enum gcommTransport {
  gcommTransportAuto = 0,   /**< CUDA devices: NCCL, or cuda-ipc when every rank is on one GPU; the host:
                                local (InitLocal), shm on one host or socket (Init/InitFromEnv) */
  gcommTransportNccl = 1,   /**< NCCL (CUDA devices only) */
  gcommTransportLocal = 2,  /**< ranks as threads of one process (gcommCommInitLocal) */
  gcommTransportSocket = 3, /**< host ranks in separate processes, over TCP (gcommCommInit/InitFromEnv
                                with a host device) */
  gcommTransportMpi = 4,    /**< host ranks in separate processes, over MPI's point-to-point calls
                                (gcommCommInitMpi, or InitFromEnv under mpirun, with a host device) */
  gcommTransportShm = 5,    /**< host ranks in separate processes on one host, over shared memory
                                (gcommCommInit/InitFromEnv with a host device) */
  gcommTransportCudaIpc = 6 /**< ranks in separate processes on one GPU, over CUDA IPC
                                (gcommCommInit/InitFromEnv with a CUDA device) */
} gcommTransport_t;

/** Communicator configuration (versioned config struct, version 1).
 *  Fields left at their "unset" value are taken from the launcher's environment
 *  (torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; Open MPI:
 *  OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK; Slurm: SLURM_PROCID, SLURM_NTASKS,
 *  SLURM_LOCALID) by gcommCommInitFromEnv, or are required by gcommCommInit. */
typedef struct gcommCommConfig {
  size_t size;
  uint32_t magic;
  uint32_t version;
  int rank;                /**< -1: unset */
  int world_size;          /**< -1: unset */
  int local_rank;          /**< -1: unset (selects the GPU when device.ordinal is -1) */
  int master_port;         /**< -1: unset (GRADCOMM_MASTER_PORT, else MASTER_PORT; + 1 under torchrun) */
  const char* master_addr; /**< NULL: unset. Rank 0 listens here; the others connect. */
  const char* job_key;  /**< NULL: GRADCOMM_JOB_KEY, else derived from the launch (see gcommCommInitFromEnv).
                           Peers with another key are refused. */
  gcommDevice_t device; /**< host, or CUDA ordinal; a CUDA ordinal of -1 means "from local_rank" */
  double timeout_s;     /**< <= 0: GRADCOMM_TIMEOUT_S, else 300 s. Init and every collective. */
  gcommTransport_t transport;
  int32_t reserved_v1; /**< keeps the version-1 fields 8-byte aligned; leave 0 */
} gcommCommConfig_t;

#define GCOMM_COMM_CONFIG_INITIALIZER                                                               \
  {                                                                                                 \
    GCOMM_CONFIG_HEADER(gcommCommConfig_t), -1, -1, -1, -1, NULL, NULL, {gcommDeviceCuda, -1}, 0.0, \
        gcommTransportAuto, 0                                                                       \
  }

/** Creates this process's rank of a multi-process job, meeting the other ranks
 *  through gradcomm's TCP rendezvous store: rank 0 listens on
 *  master_addr:master_port, the others connect (retrying until the timeout). The
 *  transport follows the device: for a CUDA device rank 0 publishes the
 *  ncclUniqueId there and NCCL init follows (non-blocking, bounded by what is left
 *  of the timeout); for gcommHostDevice() the ranks connect to each other over TCP
 *  (the socket transport). Collective: every rank must call it.
 *
 *  @p config may be NULL. Its fields that are set win; the unset ones come from the
 *  environment of the launcher that started the process: torchrun (RANK,
 *  WORLD_SIZE, LOCAL_RANK, with TORCHELASTIC_RUN_ID), else Open MPI
 *  (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), else srun (SLURM_PROCID,
 *  SLURM_NTASKS, SLURM_LOCALID in a step), else a hand-set RANK and WORLD_SIZE; a
 *  hand-set RANK that disagrees with mpirun's or srun's loses, with a warning, and
 *  sbatch -n N without srun is refused at once (docs/install.md). MASTER_ADDR and
 *  MASTER_PORT name rank 0's store; unset, srun implies them (loopback on one node,
 *  else the step's first node; a port from the job and step ids), and so does
 *  mpirun with every rank on one host; torchrun sets them. Under torchrun (TORCHELASTIC_RUN_ID set), whose
 *  agent listens on MASTER_PORT itself, gradcomm's store takes MASTER_PORT + 1;
 *  GRADCOMM_MASTER_PORT, if set, names the store's port with any launcher. The GPU is config->device, else
 * cuda:<local rank>, checked against the visible devices. Job key: config->job_key, else GRADCOMM_JOB_KEY,
 * else "gradcomm" joined with the launcher's id of the launch (TORCHELASTIC_RUN_ID; PMIX_NAMESPACE or Open
 * MPI's job id; SLURM_JOB_ID and SLURM_STEP_ID), so that two launches on one port stay apart; a peer with
 * another key is refused.
 *
 *  Errors (every rank fails, none hangs past the timeout):
 *  gcommInvalidArgument for bad or missing values (naming the variable or field);
 *  gcommTimeout naming the ranks that never connected ("rank 2 of 4 never connected
 *  to node1:29500 within 30 s ..."); gcommRemoteError naming a rank that cannot
 *  take part or failed (and why); gcommNotSupported for a CUDA device on a machine
 *  without a GPU (after the rendezvous, which the message says worked: set
 *  config->device to gcommHostDevice() for the socket transport), or for
 *  config->transport = gcommTransportNccl with a host device (at once).
 *  Destroying the communicator meets the other ranks at a shutdown barrier
 *  (bounded by the timeout; skipped after an abort). */
GCOMM_API gcommStatus_t gcommCommInitFromEnv(const gcommCommConfig_t* config, gcommComm_t* comm);

/** An MPI communicator's Fortran handle that names MPI_COMM_WORLD (any MPI). */
#define GCOMM_MPI_COMM_WORLD (-1)

/** Creates this process's rank of a job whose processes form an MPI communicator,
 *  meeting through MPI instead of MASTER_ADDR / MASTER_PORT (docs/install.md):
 *  rank and world size are the communicator's, the local rank (and so the GPU) is
 *  this process's rank among those of its host, and rank 0 broadcasts its store's
 *  address, port and job key (each from @p config, else MASTER_ADDR,
 *  GRADCOMM_MASTER_PORT / MASTER_PORT, GRADCOMM_JOB_KEY, else its host name, a free
 *  port and a fresh key). Then as gcommCommInit. Collective over the communicator.
 *  @p mpi_comm_fortran: MPI_Comm_c2f(comm), or GCOMM_MPI_COMM_WORLD (the handle keeps
 *  MPI's types out of this header). MPI is initialized if the program has not (and
 *  finalized at exit). The MPI calls are in libgradcomm_mpi.so.0, built where MPI is
 *  found and loaded on first use: without it, gcommNotSupported naming where it was
 *  looked for. @p config may be NULL; rank and world_size, if set, must match MPI's.
 *  gcommCommInitFromEnv takes this path by itself under mpirun across hosts without
 *  MASTER_ADDR, or whenever GRADCOMM_BOOTSTRAP=mpi.
 *
 *  With config->transport = gcommTransportMpi (or, with gcommTransportAuto,
 *  GRADCOMM_TRANSPORT=mpi) and a host device, no store is met: the communicator is
 *  the MPI transport over a duplicate of the MPI communicator (MPI's own wire, e.g.
 *  InfiniBand, for host ranks on many machines), running the socket transport's
 *  algorithms over MPI's non-blocking sends and receives, so it gives the same
 *  bits; every wait is bounded by the timeout. gcommCommInitFromEnv builds it over
 *  MPI_COMM_WORLD the same way. MPI must allow the calling thread to call it (MPI
 *  initialized by gradcomm is MPI_THREAD_MULTIPLE). */
GCOMM_API gcommStatus_t gcommCommInitMpi(const gcommCommConfig_t* config, int mpi_comm_fortran,
                                         gcommComm_t* comm);

/** The rank and world size a launcher set for this process, read and checked as
 *  gcommCommInitFromEnv reads them (the launcher that started the process wins
 *  over a hand-set RANK; docs/install.md): for
 *  tools that must decide whether each process is one rank of a job. No launcher's
 *  rank variable set: *rank = -1, *world_size = 0, gcommSuccess. Malformed or
 *  inconsistent values (WORLD_SIZE=abc, 0 or -2, RANK without WORLD_SIZE, a rank
 *  not below the world size, sbatch -n N without srun): gcommInvalidArgument naming
 *  the variable. */
GCOMM_API gcommStatus_t gcommGetLauncherRank(int* rank, int* world_size);

/** Like gcommCommInitFromEnv, from explicit values only: config->rank,
 *  config->world_size, config->master_addr and config->master_port (the last two
 *  unless world_size is 1), and config->device or config->local_rank are required.
 *  The environment is read only for the GRADCOMM_JOB_KEY and GRADCOMM_TIMEOUT_S
 *  defaults, and for GRADCOMM_TRANSPORT where config->transport is gcommTransportAuto. */
GCOMM_API gcommStatus_t gcommCommInit(const gcommCommConfig_t* config, gcommComm_t* comm);

/** Creates an NCCL communicator from an ncclUniqueId the caller already shared
 *  (@p unique_id points to the ncclUniqueId's bytes; @p id_bytes must be its size,
 *  128). config->rank, config->world_size and a CUDA config->device (or
 *  config->local_rank) are required. Init is non-blocking and polled against the
 *  timeout (NCCL >= 2.14); a rank that never arrives makes it fail with gcommTimeout. */
GCOMM_API gcommStatus_t gcommCommInitFromUniqueId(const gcommCommConfig_t* config, const void* unique_id,
                                                  size_t id_bytes, gcommComm_t* comm);

/** Wraps an ncclComm_t the caller owns. gradcomm never destroys it (Destroy frees
 *  only gradcomm's state); Abort, or the watchdog, does abort it (ncclCommAbort).
 *  @p device must be its device. @p timeout_s <= 0: GRADCOMM_TIMEOUT_S, else 300 s. */
GCOMM_API gcommStatus_t gcommCommWrapNccl(void* nccl_comm, gcommDevice_t device, double timeout_s,
                                          gcommComm_t* comm);

/** One NCCL communicator per listed GPU, all in this process (ncclCommInitAll).
 *  @p devices may be NULL for 0..ndev-1. Writes @p ndev handles; drive each from
 *  its own thread, or all from one thread inside gcommGroupStart/End. */
GCOMM_API gcommStatus_t gcommCommInitAll(int ndev, const int* devices, gcommComm_t* comms);

/** @p nranks communicators on the local transport: ranks are threads of this
 *  process, on the host or all on one GPU (@p device). Writes @p nranks handles;
 *  each must be driven by its own thread. timeout_s and job_key are read from
 *  @p config (may be NULL); the rest of it is ignored. */
GCOMM_API gcommStatus_t gcommCommInitLocal(int nranks, gcommDevice_t device, const gcommCommConfig_t* config,
                                           gcommComm_t* comms);

/** Frees the communicator (after an abort too). Waits at most the timeout for
 *  its outstanding work; never hangs. */
GCOMM_API gcommStatus_t gcommCommDestroy(gcommComm_t comm);

/** Aborts: outstanding and later operations fail with gcommAborted; peers see a
 *  remote failure or time out. Destroy is still required. */
GCOMM_API gcommStatus_t gcommCommAbort(gcommComm_t comm);

GCOMM_API gcommStatus_t gcommCommRank(gcommComm_t comm, int* rank);
GCOMM_API gcommStatus_t gcommCommSize(gcommComm_t comm, int* size);
GCOMM_API gcommStatus_t gcommCommDevice(gcommComm_t comm, gcommDevice_t* device);
/** gcommTransportNccl, gcommTransportLocal, gcommTransportSocket, gcommTransportMpi, gcommTransportShm or
 *  gcommTransportCudaIpc. */
GCOMM_API gcommStatus_t gcommCommTransport(gcommComm_t comm, gcommTransport_t* transport);
/** The transport's name, as GRADCOMM_TRANSPORT takes it ("auto", "nccl", "socket",
 *  "shm", "cuda-ipc", "local", "mpi"): static storage. A value that is no gcommTransport_t gives "unknown"
 *  and sets the last error. */
GCOMM_API const char* gcommGetTransportName(gcommTransport_t transport);
/** Payload bytes this rank has sent to the other ranks since the communicator was
 *  created (the protocol headers, 40 bytes a message, not counted): what the
 *  collectives cost on the wire. The socket, shm and MPI transports; the local
 *  transport (threads) and NCCL return gcommNotSupported. */
GCOMM_API gcommStatus_t gcommCommBytesSent(gcommComm_t comm, uint64_t* bytes);

/** The flight record: this communicator's last collectives (sequence number, kind,
 *  count, dtype, reduction, root, stream, reducer bucket, state, enqueue and
 *  completion times) as JSON, for tools/gradcomm_desync.py. A failed communicator
 *  answers too. GRADCOMM_FLIGHT_RECORDER_ENTRIES sets the ring's size (default
 *  2048, 0: off); on its first failure a communicator writes the record to
 *  GRADCOMM_FLIGHT_RECORDER_FILE when that is set (%h host, %p pid, %r rank).
 *  Dump: to `path`, or with path NULL to GRADCOMM_FLIGHT_RECORDER_FILE.
 *  Get: into `buffer` (output-string convention: `required` gets the length + 1). */
GCOMM_API gcommStatus_t gcommCommDumpFlightRecord(gcommComm_t comm, const char* path);
GCOMM_API gcommStatus_t gcommCommGetFlightRecord(gcommComm_t comm, char* buffer, size_t size,
                                                 size_t* required);

/** gcommSuccess while healthy; otherwise the status that aborted the communicator
 *  (its message is put in the last-error message). Does not block. */
GCOMM_API gcommStatus_t gcommCommGetAsyncError(gcommComm_t comm, gcommStatus_t* async_status);

/** Waits (up to the timeout) until every collective enqueued so far completed. */
GCOMM_API gcommStatus_t gcommCommSynchronize(gcommComm_t comm);

/* Collectives: NCCL's semantics. sendbuf == recvbuf is the in-place variant. */
GCOMM_API gcommStatus_t gcommAllReduce(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                       gcommDataType_t dtype, gcommRedOp_t op, gcommStream_t stream);
GCOMM_API gcommStatus_t gcommBroadcast(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                       gcommDataType_t dtype, int root, gcommStream_t stream);
GCOMM_API gcommStatus_t gcommReduce(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                    gcommDataType_t dtype, gcommRedOp_t op, int root, gcommStream_t stream);
/** recvbuf holds size*sendcount elements, rank r's block at offset r*sendcount. */
GCOMM_API gcommStatus_t gcommAllGather(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                       gcommDataType_t dtype, gcommStream_t stream);
/** sendbuf holds size*recvcount elements; rank r receives the reduction of block r. */
GCOMM_API gcommStatus_t gcommReduceScatter(gcommComm_t comm, const void* sendbuf, void* recvbuf,
                                           size_t recvcount, gcommDataType_t dtype, gcommRedOp_t op,
                                           gcommStream_t stream);
/** Every rank sends block q of sendbuf (count elements at offset q*count) to rank q and
 *  receives rank q's block for it into recvbuf at offset q*count: both buffers hold
 *  size*count elements. sendbuf and recvbuf must not overlap (there is no in-place
 *  variant: NCCL's has none either). NCCL: ncclAlltoAll, or grouped send/recv before
 *  NCCL 2.28. */
GCOMM_API gcommStatus_t gcommAllToAll(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      gcommDataType_t dtype, gcommStream_t stream);
/** Point-to-point (ncclSend/ncclRecv): `count` elements from this rank to `peer`,
 *  or from `peer` into recvbuf. The k-th send from rank r to rank q meets q's k-th
 *  receive from r; their counts and dtypes must agree: otherwise the receiver gets
 *  gcommInvalidArgument naming both, and the sender gcommInvalidArgument (local
 *  transport) or gcommRemoteError (socket and MPI transports, at once or at its
 *  next call). Only the two ranks take part: these calls have their own numbering
 *  in messages and the flight record ("send #3 ... to rank 1"). Outside a group a
 *  send may wait for its receive (the local transport's always does; the socket
 *  and MPI transports' return once the data is handed over, at once when it fits
 *  the wire's buffers), so two ranks that both send first can wait for each other
 *  until the timeout; inside a group (gcommGroupStart/End) a rank's sends and
 *  receives progress together, as NCCL's do (a ring of send-to-the-right and
 *  receive-from-the-left completes), and a rank may send to itself. Host
 *  transports run a group's sends and receives at gcommGroupEnd; its buffers must
 *  stay untouched until then, and a buffer sent must not also be received into in
 *  the same group. */
GCOMM_API gcommStatus_t gcommSend(gcommComm_t comm, const void* sendbuf, size_t count, gcommDataType_t dtype,
                                  int peer, gcommStream_t stream);
GCOMM_API gcommStatus_t gcommRecv(gcommComm_t comm, void* recvbuf, size_t count, gcommDataType_t dtype,
                                  int peer, gcommStream_t stream);
/** Completes when every rank reached it (stream-ordered on a CUDA communicator). */
GCOMM_API gcommStatus_t gcommBarrier(gcommComm_t comm, gcommStream_t stream);

/** The divergence check (docs/observability.md): do the ranks hold the same bytes?
 *  Collective: every rank passes @p n spans (data[i], bytes[i] bytes) in the same
 *  order and of the same sizes, in memory of the communicator's device (on a GPU,
 *  written by work on @p stream). Each rank hashes each span (XXH64 of 64 KiB chunks,
 *  combined; a kernel on a GPU), the hashes are all-gathered (8 bytes a span a rank)
 *  and every rank compares them alike. For each rank r, first_mismatch[r] (an array
 *  of the communicator's size) receives the index of the first span whose hash on r
 *  differs from the majority's, or -1; the majority of a span is the hash most ranks
 *  hold, and among groups equally large the one holding the lowest rank (two ranks
 *  that disagree: rank 1 is named). *mismatched_spans (may be NULL) receives how
 *  many spans some rank disagrees on. Disagreement is a result, not an error:
 *  gcommSuccess. Blocks until done (a GPU's stream is synchronized); refused inside
 *  a group. A bad argument is refused before anything runs or is written: n over
 *  2^24, a NULL span with bytes, a span past GCOMM_ADDRESS_LIMIT or past the end of
 *  its allocation (where the driver knows it), memory the device cannot use. */
GCOMM_API gcommStatus_t gcommCommCheckDivergence(gcommComm_t comm, const void* const* data,
                                                 const size_t* bytes, size_t n, gcommStream_t stream,
                                                 int64_t* first_mismatch, size_t* mismatched_spans);

/** Group calls (ncclGroupStart/End): collectives of several communicators driven
 *  from one thread, launched together at the outermost gcommGroupEnd (NCCL
 *  communicators; the local and socket transports run each collective at once,
 *  so their ranks still need a thread each, and run the group's sends and
 *  receives together at its end). Per thread; groups nest. End fails with
 *  gcommInvalidState without a matching start; if the launch fails, every
 *  communicator with a call in the group is aborted and End returns the error.
 *  Inside a group: only the collective calls; reducer calls are refused
 *  (gcommInvalidState), and a communicator with calls in an open group can be
 *  neither destroyed nor synchronized (gcommInvalidState). */
GCOMM_API gcommStatus_t gcommGroupStart(void);
GCOMM_API gcommStatus_t gcommGroupEnd(void);

/** "sum", "avg", "max", "min"; "unknown" otherwise. Never NULL. */
GCOMM_API const char* gcommRedOpName(gcommRedOp_t op);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GRADCOMM_COMM_H */
