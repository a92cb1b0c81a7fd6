// C API of the communicators (include/gradcomm/comm.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "comm/api/handles.hpp"
#include "comm/api/publish.hpp"
#include "comm/communicator.hpp"
#include "comm/divergence/divergence_check.hpp"
#include "comm/group.hpp"
#include "comm/local/local_transport.hpp"
#include "comm/transports.hpp"
#include "common/api/out_string.hpp"
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/device.hpp"
#include "common/env.hpp"
#include "common/handle_registry.hpp"

using namespace gradcomm;
using namespace gradcomm::comm;

struct gcommComm : UseCounted {  // reducers built on it
  Communicator comm;
  gcommComm(std::unique_ptr<Transport> t, double timeout_s) : comm(std::move(t), timeout_s) {}
};

namespace {

HandleRegistry<gcommComm>& comms() {
  static HandleRegistry<gcommComm> registry("gcommComm_t");
  return registry;
}

// Runs one collective through the communicator behind `handle`.
void run(gcommComm_t handle, Collective op, const void* send, void* recv, size_t count, gcommDataType_t dtype,
         gcommRedOp_t redop, int root, gcommStream_t stream) {
  comms().get(handle)->comm.collective(collective_call(op, send, recv, count, dtype, stream, redop, root));
}

}  // namespace

extern "C" {

GCOMM_API gcommStatus_t gcommCommInitLocal(int nranks, gcommDevice_t device, const gcommCommConfig_t* config,
                                           gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    const gcommCommConfig_t defaults = GCOMM_COMM_CONFIG_INITIALIZER;
    gcommCommConfig_t c = read_config(config, defaults, "gcommCommConfig_t");
    require(c.transport == gcommTransportAuto || c.transport == gcommTransportLocal,
            "config.transport must be gcommTransportAuto or gcommTransportLocal for gcommCommInitLocal");
    double timeout = timeout_from(c);
    publish_communicators(make_local_transports(nranks, device, timeout), timeout, out);
  });
}

GCOMM_API gcommStatus_t gcommCommDestroy(gcommComm_t comm) {
  return GCOMM_API_CALL({
    refuse_to_destroy_communicator(comm);
    comms().destroy(comm);
  });
}

GCOMM_API gcommStatus_t gcommCommAbort(gcommComm_t comm) {
  return GCOMM_API_CALL({ comms().get(comm)->comm.abort(); });
}

GCOMM_API gcommStatus_t gcommCommRank(gcommComm_t comm, int* rank) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(rank);
    *rank = comms().get(comm)->comm.rank();
  });
}

GCOMM_API gcommStatus_t gcommCommSize(gcommComm_t comm, int* size) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(size);
    *size = comms().get(comm)->comm.size();
  });
}

GCOMM_API gcommStatus_t gcommCommDevice(gcommComm_t comm, gcommDevice_t* device) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(device);
    *device = comms().get(comm)->comm.device();
  });
}

GCOMM_API gcommStatus_t gcommCommTransport(gcommComm_t comm, gcommTransport_t* transport) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(transport);
    *transport = comms().get(comm)->comm.kind();
  });
}

GCOMM_API const char* gcommGetTransportName(gcommTransport_t transport) {
  if (transport == gcommTransportAuto) return "auto";
  if (const TransportEntry* t = find_transport(transport)) return t->name;
  set_last_error(
      cat("gcommGetTransportName: ", static_cast<int>(transport), " is not a gcommTransport_t value"));
  return "unknown";
}

GCOMM_API gcommStatus_t gcommCommDumpFlightRecord(gcommComm_t comm, const char* path) {
  return GCOMM_API_CALL({ comms().get(comm)->comm.dump_flight_record(path != nullptr ? path : ""); });
}

GCOMM_API gcommStatus_t gcommCommGetFlightRecord(gcommComm_t comm, char* buffer, size_t size,
                                                 size_t* required) {
  return GCOMM_API_CALL({
    const std::string json = comms().get(comm)->comm.flight_record("requested");
    copy_out_string(json, buffer, size, required);
  });
}

GCOMM_API gcommStatus_t gcommCommBytesSent(gcommComm_t comm, uint64_t* bytes) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(bytes);
    Communicator& c = comms().get(comm)->comm;
    const std::optional<uint64_t> sent = c.transport().payload_bytes_sent();
    if (!sent) {
      const TransportEntry* entry = find_transport(c.kind());
      fail(gcommNotSupported, "the ", entry != nullptr ? entry->name : "?",
           " transport does not count the bytes it sends (only the socket transport does)");
    }
    *bytes = *sent;
  });
}

GCOMM_API gcommStatus_t gcommCommGetAsyncError(gcommComm_t comm, gcommStatus_t* async_status) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(async_status);
    std::string message;
    *async_status = comms().get(comm)->comm.health(message);
    if (*async_status != gcommSuccess) set_last_error(message);
  });
}

GCOMM_API gcommStatus_t gcommCommSynchronize(gcommComm_t comm) {
  return GCOMM_API_CALL({ comms().get(comm)->comm.synchronize(); });
}

GCOMM_API gcommStatus_t gcommAllReduce(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                       gcommDataType_t dtype, gcommRedOp_t op, gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kAllReduce, sendbuf, recvbuf, count, dtype, op, 0, stream); });
}

GCOMM_API gcommStatus_t gcommBroadcast(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                       gcommDataType_t dtype, int root, gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kBroadcast, sendbuf, recvbuf, count, dtype, gcommSum, root, stream); });
}

GCOMM_API gcommStatus_t gcommReduce(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                    gcommDataType_t dtype, gcommRedOp_t op, int root, gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kReduce, sendbuf, recvbuf, count, dtype, op, root, stream); });
}

GCOMM_API gcommStatus_t gcommAllGather(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                       gcommDataType_t dtype, gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kAllGather, sendbuf, recvbuf, sendcount, dtype, gcommSum, 0, stream); });
}

GCOMM_API gcommStatus_t gcommReduceScatter(gcommComm_t comm, const void* sendbuf, void* recvbuf,
                                           size_t recvcount, gcommDataType_t dtype, gcommRedOp_t op,
                                           gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kReduceScatter, sendbuf, recvbuf, recvcount, dtype, op, 0, stream); });
}

GCOMM_API gcommStatus_t gcommCommCheckDivergence(gcommComm_t comm, const void* const* data,
                                                 const size_t* bytes, size_t n, gcommStream_t stream,
                                                 int64_t* first_mismatch, size_t* mismatched_spans) {
  return GCOMM_API_CALL({
    Communicator& c = comms().get(comm)->comm;
    GCOMM_REQUIRE_NOT_NULL(first_mismatch);
    if (in_group())
      fail(gcommInvalidState, "gcommCommCheckDivergence returns its result at once: not inside a group");
    const DivergenceReport report = check_divergence(c, data, bytes, n, stream);
    std::copy(report.first_mismatch.begin(), report.first_mismatch.end(), first_mismatch);
    if (mismatched_spans != nullptr) *mismatched_spans = report.mismatched_spans;
  });
}

GCOMM_API gcommStatus_t gcommAllToAll(gcommComm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      gcommDataType_t dtype, gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kAllToAll, sendbuf, recvbuf, count, dtype, gcommSum, 0, stream); });
}

GCOMM_API gcommStatus_t gcommSend(gcommComm_t comm, const void* sendbuf, size_t count, gcommDataType_t dtype,
                                  int peer, gcommStream_t stream) {
  return GCOMM_API_CALL({
    comms().get(comm)->comm.collective(p2p_call(Collective::kSend, sendbuf, count, dtype, peer, stream));
  });
}

GCOMM_API gcommStatus_t gcommRecv(gcommComm_t comm, void* recvbuf, size_t count, gcommDataType_t dtype,
                                  int peer, gcommStream_t stream) {
  return GCOMM_API_CALL({
    comms().get(comm)->comm.collective(p2p_call(Collective::kRecv, recvbuf, count, dtype, peer, stream));
  });
}

GCOMM_API gcommStatus_t gcommBarrier(gcommComm_t comm, gcommStream_t stream) {
  return GCOMM_API_CALL(
      { run(comm, Collective::kBarrier, nullptr, nullptr, 0, gcommFloat32, gcommSum, 0, stream); });
}

GCOMM_API gcommStatus_t gcommGroupStart(void) {
  return GCOMM_API_CALL({ group_start(); });
}

GCOMM_API gcommStatus_t gcommGroupEnd(void) {
  return GCOMM_API_CALL({ group_end(); });
}

GCOMM_API const char* gcommRedOpName(gcommRedOp_t op) {
  switch (op) {
    case gcommSum:
      return "sum";
    case gcommAvg:
      return "avg";
    case gcommMax:
      return "max";
    case gcommMin:
      return "min";
    default:
      return "unknown";
  }
}

}  // extern "C"

// The reducer's C API (reducer/api/reducer_api.cpp) takes communicators by handle;
// comm_init_api.cpp and each transport's own C API (comm/nccl/nccl_api.cpp) create them.
namespace gradcomm::comm {
gcommComm_t publish_communicator(std::unique_ptr<Transport> transport, double timeout_s) {
  auto comm = std::make_unique<gcommComm>(std::move(transport), timeout_s);
  comms().add(comm.get());
  return comm.release();
}

void publish_communicators(std::vector<std::unique_ptr<Transport>> transports, double timeout_s,
                           gcommComm_t* out) {
  std::vector<std::unique_ptr<gcommComm>> made;
  for (auto& t : transports) made.push_back(std::make_unique<gcommComm>(std::move(t), timeout_s));
  // Nothing is published until every rank's communicator exists.
  for (size_t r = 0; r < made.size(); ++r) {
    out[r] = made[r].release();
    comms().add(out[r]);
  }
}

double timeout_from(const gcommCommConfig_t& c) {
  require(!(c.timeout_s != c.timeout_s), "timeout_s is NaN");
  return c.timeout_s > 0 ? c.timeout_s : knobs::timeout_seconds();
}

Communicator& acquire_communicator(gcommComm_t handle) {
  return comms().acquire(handle).comm;
}
void release_communicator(gcommComm_t handle) noexcept {
  comms().release(handle);
}
void refuse_to_destroy_communicator(gcommComm_t handle) {
  comms().refuse_if_used(handle, "the communicator");
  int grouped = comms().get(handle)->comm.grouped_calls();
  if (grouped > 0)
    fail(gcommInvalidState, "the communicator has ", grouped,
         " collective(s) in a group not yet ended; call gcommGroupEnd on the thread that began it first");
}
}  // namespace gradcomm::comm
