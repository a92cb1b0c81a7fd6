#include "comm/job_facts.hpp"

#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/store_protocol.hpp"
#include "comm/nccl/nccl_version.hpp"
#include "common/cuda_check.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::vector<int> JobFacts::apart_from_rank0(bool pid_namespace) const {
  std::vector<int> apart;
  for (int q = 1; q < size(); ++q)
    if (ranks[q].host != ranks[0].host || (pid_namespace && ranks[q].pid_namespace != ranks[0].pid_namespace))
      apart.push_back(q);
  return apart;
}

std::string host_identity() {
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  return std::string(host) + " " + boot_id;
}

RankFacts this_rank_facts(const gcommDevice_t& device) {
  RankFacts f;
  f.device_kind = device.kind;
  f.host = host_identity();
  struct stat st {};
  f.pid_namespace = ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  f.pid = static_cast<long>(::getpid());
  if (device.kind == gcommDeviceCuda) {
    cudaDeviceProp prop{};
    GCOMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.ordinal));
    char uuid[2 * sizeof(prop.uuid.bytes) + 8] = "GPU-";
    for (size_t i = 0; i < sizeof(prop.uuid.bytes); ++i)
      std::snprintf(uuid + 4 + 2 * i, 3, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
    f.gpu = uuid;
    f.nccl_missing = nccl_load_report().error;
  }
  return f;
}

JobFacts gather_job_facts(Bootstrap& met, const gcommDevice_t& device) {
  const RankFacts mine = this_rank_facts(device);
  Writer w;
  w.u32(static_cast<uint32_t>(mine.device_kind))
      .str(mine.host)
      .str(std::to_string(mine.pid_namespace))
      .str(std::to_string(mine.pid))
      .str(mine.gpu)
      .str(mine.nccl_missing);
  const std::vector<std::vector<uint8_t>> all = met.store().gather("job/facts", w.payload(), met.deadline());
  JobFacts job;
  for (const std::vector<uint8_t>& bytes : all) {
    Reader r(bytes.data(), bytes.size(), "a rank's facts (another gradcomm version?)");
    RankFacts f;
    f.device_kind = static_cast<gcommDeviceKind_t>(r.u32());
    f.host = r.str();
    f.pid_namespace = std::stoull(r.str());
    f.pid = std::stol(r.str());
    f.gpu = r.str();
    f.nccl_missing = r.str(kMaxPayloadBytes);
    r.finish();
    job.ranks.push_back(std::move(f));
  }
  return job;
}

GpuSharing gpu_sharing(const std::vector<GpuPlace>& places, std::string& detail) {
  const auto same = [](const GpuPlace& a, const GpuPlace& b) { return a.host == b.host && a.gpu == b.gpu; };
  bool all_on_first = places.size() > 1;
  for (size_t q = 1; q < places.size(); ++q) all_on_first = all_on_first && same(places[q], places[0]);
  if (all_on_first) return GpuSharing::kOneGpu;
  for (size_t q = 0; q < places.size(); ++q)
    for (size_t p = 0; p < q; ++p)
      if (same(places[p], places[q])) {
        detail = cat("ranks ", p, " and ", q, " are on one GPU (", places[q].gpu, ") but not every rank is");
        return GpuSharing::kMixed;
      }
  return GpuSharing::kOwnGpus;
}

GpuSharing gpu_sharing(const JobFacts& job, std::string& detail) {
  std::vector<GpuPlace> places;
  for (const RankFacts& f : job.ranks) places.push_back(GpuPlace{f.host, f.gpu});
  return gpu_sharing(places, detail);
}

}  // namespace gradcomm::comm
