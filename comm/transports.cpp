#include "comm/transports.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "comm/bootstrap/store_state.hpp"
#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "comm/nccl/nccl_job.hpp"
#include "comm/nccl/store_init.hpp"
#include "comm/rank_meeting.hpp"
#include "comm/shm/shm_transport.hpp"
#include "comm/socket/socket_transport.hpp"
#include "comm/store_backed_transport.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {

// Order matters for gcommTransportAuto: the first entry that can serve the job.
const TransportEntry kTransports[] = {
    {gcommTransportNccl, "nccl", "gcommTransportNccl", gcommDeviceCuda, nccl_can_serve, make_nccl_over_job,
     nullptr, nullptr},
    {gcommTransportCudaIpc, "cuda-ipc", "gcommTransportCudaIpc", gcommDeviceCuda, cuda_ipc_can_serve,
     make_cuda_ipc_over_job, refuse_cuda_ipc_without_a_gpu, nullptr},
    {gcommTransportShm, "shm", "gcommTransportShm", gcommDeviceHost, shm_can_serve, make_shm_over_job,
     nullptr, nullptr},
    {gcommTransportSocket, "socket", "gcommTransportSocket", gcommDeviceHost, socket_can_serve,
     make_socket_over_job, nullptr, nullptr},
    {gcommTransportLocal, "local", "gcommTransportLocal", gcommDeviceHost, nullptr, nullptr, nullptr,
     "local ranks are threads of one process; create them with gcommCommInitLocal"},
    {gcommTransportMpi, "mpi", "gcommTransportMpi", gcommDeviceHost, nullptr, nullptr, nullptr,
     "the MPI transport is made from an MPI communicator: gcommCommInitMpi, or gcommCommInitFromEnv under "
     "mpirun"},
};

const char* memory_name(gcommDeviceKind_t kind) {
  return kind == gcommDeviceCuda ? "GPU memory" : "host memory";
}

// Every rank's device is of one kind, or gcommInvalidArgument naming the odd ones:
// a host rank among GPU ranks would wait for data that never comes.
void require_one_device_kind(const JobFacts& job) {
  std::vector<int> odd;
  for (int q = 1; q < job.size(); ++q)
    if (job.ranks[q].device_kind != job.ranks[0].device_kind) odd.push_back(q);
  if (!odd.empty())
    fail(gcommInvalidArgument, bootstrap::rank_list(odd), odd.size() == 1 ? " uses " : " use ",
         job.ranks[odd[0]].device_kind == gcommDeviceCuda ? "a CUDA device" : "the host", " and rank 0 ",
         job.ranks[0].device_kind == gcommDeviceCuda ? "a CUDA device" : "the host",
         ": every rank needs the same kind of device (config.device)");
}

// "4 CUDA ranks on 1 host, 1 GPU": for the log line of the choice.
std::string job_summary(const JobFacts& job) {
  std::vector<std::string> hosts, gpus;
  for (const RankFacts& f : job.ranks) {
    if (std::find(hosts.begin(), hosts.end(), f.host) == hosts.end()) hosts.push_back(f.host);
    if (!f.gpu.empty() && std::find(gpus.begin(), gpus.end(), f.host + f.gpu) == gpus.end())
      gpus.push_back(f.host + f.gpu);
  }
  return cat(
      job.size(), job.device_kind() == gcommDeviceCuda ? " CUDA" : " host",
      job.size() == 1 ? " rank" : " ranks", " on ", hosts.size(), hosts.size() == 1 ? " host" : " hosts",
      job.device_kind() == gcommDeviceCuda ? cat(", ", gpus.size(), gpus.size() == 1 ? " GPU" : " GPUs")
                                           : "");
}

}  // namespace

const TransportEntry* find_transport(gcommTransport_t kind) noexcept {
  for (const TransportEntry& t : kTransports)
    if (t.kind == kind) return &t;
  return nullptr;
}

const TransportEntry* requested_transport(gcommTransport_t requested, const gcommDevice_t& device) {
  if (device.kind != gcommDeviceHost && device.kind != gcommDeviceCuda)
    fail(gcommInvalidArgument, "no transport moves memory of device kind ", static_cast<int>(device.kind));
  if (requested == gcommTransportAuto) return nullptr;
  const TransportEntry* t = find_transport(requested);
  if (t == nullptr) {
    std::string enumerators = "gcommTransportAuto";
    for (const TransportEntry& e : kTransports)
      if (e.can_serve != nullptr) enumerators += cat(", ", e.enumerator);
    fail(gcommInvalidArgument, "config.transport must be one of ", enumerators);
  }
  require(t->can_serve != nullptr, "config.transport is ", t->enumerator, ": ", t->not_from_store);
  if (t->moves == gcommDeviceCuda && device.kind == gcommDeviceHost) {
    if (t->kind == gcommTransportNccl)
      fail(gcommNotSupported,
           "config.transport is gcommTransportNccl but config.device is the host: NCCL needs a CUDA device "
           "per "
           "rank; host ranks use gcommTransportAuto (shm on one host, socket across hosts)");
    fail(gcommInvalidArgument, "config.transport is ", t->enumerator,
         ", which moves GPU memory: set config.device to the CUDA device the ranks share (host ranks on one "
         "host: gcommTransportShm)");
  }
  require(!(t->moves == gcommDeviceHost && device.kind != gcommDeviceHost), "config.transport is ",
          t->enumerator,
          ", which moves host memory: set config.device to gcommHostDevice() (or use gcommTransportNccl for "
          "a GPU)");
  return t;
}

std::vector<const TransportEntry*> transports_for_job(const JobFacts& job, std::string* why_not) {
  require_one_device_kind(job);
  std::vector<const TransportEntry*> fit;
  for (const TransportEntry& t : kTransports) {
    if (t.can_serve == nullptr || t.moves != job.device_kind()) continue;
    const Fit f = t.can_serve(job);
    if (f.ok())
      fit.push_back(&t);
    else if (why_not != nullptr)
      *why_not += cat(why_not->empty() ? "" : "; ", t.name, ": ", f.why);
  }
  return fit;
}

std::unique_ptr<Transport> make_transport_from_store(const bootstrap::LaunchConfig& asked) {
  const TransportEntry* named = requested_transport(asked.transport, asked.device);
  if (named != nullptr && named->refuse_before_meeting != nullptr) named->refuse_before_meeting(asked);
  RanksMet met = meet_ranks(asked);
  bootstrap::LaunchConfig launch = asked;
  launch.device = met.device;
  return finish_store_init(
      std::move(met.boot), launch, named != nullptr ? named->name : "auto",
      [&](bootstrap::Bootstrap& boot) -> std::unique_ptr<Transport> {
        const JobFacts job = gather_job_facts(boot, launch.device);
        require_one_device_kind(job);
        std::string why_not;
        if (named != nullptr) {
          const Fit f = named->can_serve(job);
          if (!f.ok())
            fail(f.status, "the ", named->name, " transport cannot serve this job: ", f.why,
                 " (GRADCOMM_TRANSPORT unset, or config.transport = gcommTransportAuto, chooses one that "
                 "can)");
          std::unique_ptr<Transport> t = named->make(boot, launch, job, why_not);
          if (t == nullptr) fail(gcommInvalidArgument, "the ", named->name, " transport: ", why_not);
          return t;
        }
        std::string passed_over, can;
        const std::vector<const TransportEntry*> fit = transports_for_job(job, &passed_over);
        for (const TransportEntry* t : fit) can += cat(can.empty() ? "" : ", ", t->name);
        for (const TransportEntry* t : fit) {
          why_not.clear();
          if (std::unique_ptr<Transport> made = t->make(boot, launch, job, why_not)) {
            GCOMM_INFO(INIT, "rank ", launch.rank, ": gcommTransportAuto chose ", t->name, " for ",
                       job_summary(job), ": the first in the table that can serve it (can: ", can,
                       passed_over.empty() ? std::string() : cat("; cannot: ", passed_over),
                       "); GRADCOMM_TRANSPORT names another");
            return made;
          }
          passed_over += cat(passed_over.empty() ? "" : "; ", t->name, ": ", why_not);
        }
        fail(gcommInvalidArgument, "no transport can serve this job of ", job.size(), " ranks on ",
             memory_name(job.device_kind()), ": ", passed_over);
      });
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
