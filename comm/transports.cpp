#include "comm/transports.hpp"

#include <iterator>
#include <optional>
#include <string>

#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "comm/host_transport.hpp"
#include "comm/nccl/store_init.hpp"
#include "comm/shm/shm_transport.hpp"
#include "comm/socket/socket_transport.hpp"
#include "common/env.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

namespace {

// Order matters for gcommTransportAuto: the first entry that serves the device.
const TransportEntry kTransports[] = {
    {gcommTransportNccl, "nccl", "gcommTransportNccl", gcommDeviceCuda, make_nccl_transport_from_store,
     nullptr},
    {gcommTransportSocket, "socket", "gcommTransportSocket", gcommDeviceHost,
     make_socket_transport_from_store, nullptr},
    {gcommTransportShm, "shm", "gcommTransportShm", gcommDeviceHost, make_shm_transport_from_store, nullptr},
    {gcommTransportCudaIpc, "cuda-ipc", "gcommTransportCudaIpc", gcommDeviceCuda,
     make_cuda_ipc_transport_from_store, nullptr},
    {gcommTransportLocal, "local", "gcommTransportLocal", gcommDeviceHost, nullptr,
     "local ranks are threads of one process; create them with gcommCommInitLocal"},
    {gcommTransportMpi, "mpi", "gcommTransportMpi", gcommDeviceHost, nullptr,
     "the MPI transport is made from an MPI communicator: gcommCommInitMpi, or gcommCommInitFromEnv under "
     "mpirun"},
};

}  // namespace

const TransportEntry* find_transport(gcommTransport_t kind) noexcept {
  for (const TransportEntry& t : kTransports)
    if (t.kind == kind) return &t;
  return nullptr;
}

// gcommTransportAuto, chosen once the ranks met: for host ranks shm or socket,
// for CUDA devices NCCL or cuda-ipc.
const TransportEntry kHostAuto = {gcommTransportAuto,
                                  "auto",
                                  "gcommTransportAuto",
                                  gcommDeviceHost,
                                  make_host_transport_from_store,
                                  nullptr};
const TransportEntry kCudaAuto = {gcommTransportAuto,
                                  "auto",
                                  "gcommTransportAuto",
                                  gcommDeviceCuda,
                                  make_cuda_transport_from_store,
                                  nullptr};

const TransportEntry& transport_for_job(gcommTransport_t requested, const gcommDevice_t& device) {
  if (requested == gcommTransportAuto) {
    if (device.kind == gcommDeviceHost) return kHostAuto;
    if (device.kind == gcommDeviceCuda) return kCudaAuto;
    fail(gcommInvalidArgument, "no transport moves memory of device kind ", static_cast<int>(device.kind));
  }
  const TransportEntry* t = find_transport(requested);
  if (t == nullptr) {
    std::string enumerators = "gcommTransportAuto";
    for (const TransportEntry& e : kTransports)
      if (e.from_store != nullptr) enumerators += cat(", ", e.enumerator);
    fail(gcommInvalidArgument, "config.transport must be one of ", enumerators);
  }
  require(t->from_store != nullptr, "config.transport is ", t->enumerator, ": ", t->not_from_store);
  require(!(t->kind == gcommTransportCudaIpc && device.kind == gcommDeviceHost),
          "config.transport is gcommTransportCudaIpc, which moves GPU memory: set config.device to the CUDA "
          "device the ranks share (host ranks on one host: gcommTransportShm)");
  // NCCL on the host is refused later, with the reason, after the ranks meet
  // (comm/nccl/store_init.cpp): every rank then fails alike.
  require(!(t->serves == gcommDeviceHost && device.kind != gcommDeviceHost), "config.transport is ",
          t->enumerator,
          ", which moves host memory: set config.device to gcommHostDevice() (or use gcommTransportNccl for "
          "a GPU)");
  return *t;
}

gcommTransport_t transport_or_env(gcommTransport_t configured) {
  if (configured != gcommTransportAuto) return configured;
  const std::optional<std::string> name = env_string("GRADCOMM_TRANSPORT");
  if (!name || name->empty() || *name == "auto") return configured;
  std::string names = "auto";
  for (const TransportEntry& t : kTransports) {
    if (*name == t.name) return t.kind;
    names += cat(", ", t.name);
  }
  fail(gcommInvalidArgument, "GRADCOMM_TRANSPORT='", *name, "' is not one of ", names);
}

}  // namespace gradcomm::comm
