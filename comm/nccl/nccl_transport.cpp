#include "comm/nccl/nccl_transport.hpp"

#include "comm/group.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <thread>

#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_job.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "common/cpu_relax.hpp"
#include "common/cuda_check.hpp"
#include "common/deadline.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {

ncclDataType_t nccl_type(gcommDataType_t d) {
  switch (d) {
    case gcommFloat16:
      return ncclFloat16;
    case gcommBfloat16:
      return ncclBfloat16;
    default:
      return ncclFloat32;
  }
}

ncclRedOp_t nccl_op(gcommRedOp_t op) {
  switch (op) {
    case gcommAvg:
      return ncclAvg;
    case gcommMax:
      return ncclMax;
    case gcommMin:
      return ncclMin;
    default:
      return ncclSum;
  }
}

// A call on a non-blocking communicator may return ncclInProgress: the work is
// being enqueued; wait for it (bounded) like any other NCCL call's completion.
// The call's name is formatted only on this slow path.
void check_call(ncclComm_t comm, ncclResult_t r, const char* expr, const CollectiveArgs& a) {
  if (r == ncclInProgress) {
    // Named as the host transports name a call, so the communicator's record says it once.
    wait_nccl_ready(comm, std::chrono::steady_clock::now() + std::chrono::seconds(60), cat(call_id(a)));
    return;
  }
  if (r != ncclSuccess) throw_nccl_error(r, expr, __FILE__, __LINE__);
}

}  // namespace

// Polls without sleeping (cpu_relax, never sched_yield: common/cpu_relax.hpp) for
// the first 100 us, then sleeps 50 us doubling to 2 ms: a
// collective's enqueue usually finishes within microseconds, and a fixed 200 us
// nap there would cost 40 times an 8-byte all-reduce; an init takes seconds and
// is polled gently.
void wait_nccl_ready(ncclComm_t comm, std::chrono::steady_clock::time_point deadline,
                     const std::string& what) {
  using std::chrono::microseconds;
  const auto start = std::chrono::steady_clock::now();
  microseconds pause(50);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    GCOMM_NCCL_CHECK(nccl().CommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      fail(state == ncclRemoteError ? gcommRemoteError : gcommNcclError, what, ": NCCL reported ",
           nccl().GetErrorString(state), " (", nccl().last_error(comm), ")");
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) fail(gcommTimeout, what, " did not complete in time");
    if (now - start < microseconds(100)) {
      cpu_relax();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, microseconds(2000));
    }
  }
}

NcclTransport::NcclTransport(ncclComm_t comm, bool owned, gcommDevice_t device)
    : comm_(comm), owned_(owned), device_(device) {
  GCOMM_NCCL_CHECK(nccl().CommUserRank(comm_, &rank_));
  GCOMM_NCCL_CHECK(nccl().CommCount(comm_, &size_));
  int cuda_device = -1;
  GCOMM_NCCL_CHECK(nccl().CommCuDevice(comm_, &cuda_device));
  require(cuda_device == device_.ordinal, "the NCCL communicator is on cuda:", cuda_device, ", not on ",
          describe_device(device_));
  DeviceGuard guard(device_);
  void* p = nullptr;
  GCOMM_CUDA_CHECK(cudaMalloc(&p, sizeof(float)));
  barrier_buffer_ = static_cast<float*>(p);
}

NcclTransport::~NcclTransport() {
  DeviceGuard guard(device_);
  GCOMM_CUDA_WARN(cudaFree(barrier_buffer_));
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (owned_ && !aborted_) {
    ncclResult_t r = nccl().CommDestroy(comm_);
    if (r != ncclSuccess) GCOMM_WARN("ncclCommDestroy failed: ", nccl().GetErrorString(r));
  }
}

void NcclTransport::run(const CollectiveArgs& a) {
  require(!aborted_, "the NCCL communicator was aborted");
  auto stream = reinterpret_cast<cudaStream_t>(a.stream);
  ncclDataType_t t = nccl_type(a.dtype);
  try {
    enqueue(a, t, stream);
  } catch (...) {
    abort();  // a failed or stuck NCCL call leaves the communicator unusable
    throw;
  }
}

void NcclTransport::enqueue(const CollectiveArgs& a, ncclDataType_t t, cudaStream_t stream) {
  switch (a.op) {
    case Collective::kAllReduce:
      check_call(comm_, nccl().AllReduce(a.send, a.recv, a.count, t, nccl_op(a.redop), comm_, stream),
                 "ncclAllReduce", a);
      break;
    case Collective::kBroadcast:
      check_call(comm_, nccl().Broadcast(a.send, a.recv, a.count, t, a.root, comm_, stream), "ncclBroadcast",
                 a);
      break;
    case Collective::kReduce:
      check_call(comm_, nccl().Reduce(a.send, a.recv, a.count, t, nccl_op(a.redop), a.root, comm_, stream),
                 "ncclReduce", a);
      break;
    case Collective::kAllGather:
      check_call(comm_, nccl().AllGather(a.send, a.recv, a.count, t, comm_, stream), "ncclAllGather", a);
      break;
    case Collective::kReduceScatter:
      check_call(comm_, nccl().ReduceScatter(a.send, a.recv, a.count, t, nccl_op(a.redop), comm_, stream),
                 "ncclReduceScatter", a);
      break;
    case Collective::kAllToAll:
      all_to_all(a, t, stream);
      break;
    case Collective::kBarrier:
      check_call(comm_,
                 nccl().AllReduce(barrier_buffer_, barrier_buffer_, 1, ncclFloat32, ncclSum, comm_, stream),
                 "ncclAllReduce (barrier)", a);
      break;
    // Inside a group, NCCL's own group (join_group) launches them together at its end.
    case Collective::kSend:
      check_call(comm_, nccl().Send(a.send, a.count, t, a.root, comm_, stream), "ncclSend", a);
      break;
    case Collective::kRecv:
      check_call(comm_, nccl().Recv(a.recv, a.count, t, a.root, comm_, stream), "ncclRecv", a);
      break;
  }
}

// ncclAlltoAll where the library has it; before NCCL 2.28 a send and a receive
// per peer in one NCCL group (nested inside the caller's group, if any: only the
// outermost ncclGroupEnd launches).
void NcclTransport::all_to_all(const CollectiveArgs& a, ncclDataType_t t, cudaStream_t stream) {
  const NcclLibrary& lib = nccl();
  if (lib.AlltoAll != nullptr) {
    check_call(comm_, lib.AlltoAll(a.send, a.recv, a.count, t, comm_, stream), "ncclAlltoAll", a);
    return;
  }
  const size_t block = a.count * dtype_size(a.dtype);
  GCOMM_NCCL_CHECK(nccl().GroupStart());
  ncclResult_t r = ncclSuccess;
  for (int q = 0; q < size_ && r == ncclSuccess; ++q) {
    r = lib.Send(static_cast<const char*>(a.send) + q * block, a.count, t, q, comm_, stream);
    if (r == ncclSuccess) r = lib.Recv(static_cast<char*>(a.recv) + q * block, a.count, t, q, comm_, stream);
  }
  const ncclResult_t ended = lib.GroupEnd();  // closes the group even after a failed call
  check_call(comm_, r != ncclSuccess ? r : ended, r != ncclSuccess ? "ncclSend/ncclRecv" : "ncclGroupEnd", a);
}

namespace {
// NCCL's flat group, opened at the first NCCL call inside ours and launched at its end.
void nccl_group_open() {
  GCOMM_NCCL_CHECK(nccl().GroupStart());
}
void nccl_group_close() {
  const ncclResult_t launched = nccl().GroupEnd();
  // In progress: a non-blocking communicator still enqueueing (wait_group_launched).
  if (launched != ncclSuccess && launched != ncclInProgress)
    throw_nccl_error(launched, "ncclGroupEnd", __FILE__, __LINE__);
}
const TransportGroupHooks kNcclGroup{nccl_group_open, nccl_group_close};
}  // namespace

void NcclTransport::join_group() {
  join_transport_group(kNcclGroup);
}

void NcclTransport::wait_group_launched(std::chrono::steady_clock::time_point deadline) {
  if (aborted_) fail(gcommAborted, "the NCCL communicator was aborted");
  try {
    wait_nccl_ready(comm_, deadline, "the group's collectives");
  } catch (...) {
    abort();
    throw;
  }
}

gcommStatus_t NcclTransport::poll_async_error(std::string& message) noexcept {
  if (aborted_) return gcommSuccess;  // the abort itself was recorded by whoever aborted
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (aborted_) return gcommSuccess;
  ncclResult_t state = ncclSuccess;
  if (nccl().CommGetAsyncError(comm_, &state) != ncclSuccess) return gcommSuccess;
  if (state == ncclSuccess || state == ncclInProgress) return gcommSuccess;
  try {
    message =
        cat("NCCL asynchronous error: ", nccl().GetErrorString(state), " (", nccl().last_error(comm_), ")");
  } catch (...) {
  }
  return state == ncclRemoteError ? gcommRemoteError : gcommNcclError;
}

void NcclTransport::abort() noexcept {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (aborted_.exchange(true)) return;
  // Abort even a wrapped communicator: the caller asked for it (or a timeout
  // did); documented in comm.h. It is freed by ncclCommAbort.
  ncclResult_t r = nccl().CommAbort(comm_);
  if (r != ncclSuccess) GCOMM_WARN("ncclCommAbort failed: ", nccl().GetErrorString(r));
}

std::vector<std::unique_ptr<Transport>> make_nccl_transports_all(int ndev, const int* devices) {
  const std::vector<int> list = nccl_device_list(ndev, devices);
  nccl();
  std::vector<ncclComm_t> comms(ndev, nullptr);
  {
    // ncclCommInitAll switches devices itself; restore the caller's afterwards.
    DeviceGuard guard(list[0]);
    GCOMM_NCCL_CHECK(nccl().CommInitAll(comms.data(), ndev, list.data()));
  }
  std::vector<std::unique_ptr<Transport>> result;
  try {
    for (int i = 0; i < ndev; ++i)
      result.push_back(std::make_unique<NcclTransport>(comms[i], true, gcommCudaDevice(list[i])));
  } catch (...) {
    for (size_t i = result.size(); i < comms.size(); ++i) (void)nccl().CommDestroy(comms[i]);
    throw;
  }
  return result;
}

std::unique_ptr<Transport> make_nccl_transport_from_id(const ncclUniqueId& id, int rank, int nranks,
                                                       gcommDevice_t device, double timeout_s) {
  require(nranks >= 1 && rank >= 0 && rank < nranks, "rank ", rank, " / world size ", nranks,
          " is not valid");
  require(device.kind == gcommDeviceCuda, "the NCCL transport needs a CUDA device");
  device = validate_device(device);
  nccl();  // loaded (or refused, naming where it looked) before its version gates a feature
  DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  std::string what = cat("NCCL init of rank ", rank, " of ", nranks, " on ", describe_device(device));
  if (nccl_has(NcclFeature::kNonBlockingInit)) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = nccl().CommInitRankConfig(&comm, nranks, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
      throw_nccl_error(r, "ncclCommInitRankConfig", __FILE__, __LINE__);
    auto deadline = deadline_after(timeout_s);
    try {
      wait_nccl_ready(comm, deadline, what);
    } catch (const Error& e) {
      (void)nccl().CommAbort(comm);
      if (e.status() == gcommTimeout)
        fail(gcommTimeout, what, " did not complete within ", timeout_s,
             " s: check that every rank was started, with the same unique id and world size");
      throw;
    } catch (...) {
      (void)nccl().CommAbort(comm);
      throw;
    }
  } else {
    GCOMM_WARN("NCCL ", nccl_version_string(nccl_loaded_version()),
               " has no non-blocking init: init is blocking and cannot time out");
    GCOMM_NCCL_CHECK(nccl().CommInitRank(&comm, nranks, id, rank));
  }
  try {
    return std::make_unique<NcclTransport>(comm, true, device);
  } catch (...) {
    (void)nccl().CommDestroy(comm);
    throw;
  }
}

}  // namespace gradcomm::comm
