#include "comm/rank_meeting.hpp"

#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

namespace {

// Whether this rank can take part with its device ("" message when it can).
RankReport this_rank_report(const LaunchConfig& launch, gcommDevice_t& device) {
  RankReport mine;
  if (launch.device.kind != gcommDeviceCuda) return mine;
  if (!gpu_available()) {
    mine.status = gcommNotSupported;
    mine.message = cat(
        "no usable GPU on this machine (", no_gpu_reason(),
        "): ranks in separate processes communicate through NCCL (a GPU each) or the cuda-ipc transport "
        "(one shared GPU), which need a CUDA device; without a GPU, set config.device to gcommHostDevice() "
        "for host ranks (the shm transport on one host, socket across hosts)");
    return mine;
  }
  try {
    device = validate_device(launch.device, cat("rank ", launch.rank, "'s device").c_str());
  } catch (...) {  // whatever was thrown, every rank hears it at the meeting
    const Error e = as_error(std::current_exception());
    mine.status = e.status();
    mine.message = e.message();
  }
  return mine;
}

}  // namespace

RanksMet meet_ranks(const LaunchConfig& launch) {
  gcommDevice_t device = launch.device;
  const RankReport mine = this_rank_report(launch, device);
  auto boot = std::make_unique<Bootstrap>(rendezvous_options(launch));
  std::vector<RankReport> reports = boot->meet(mine);
  // Every rank has every report: all fail alike, with no need to tell each other.
  if (mine.status != gcommSuccess)
    fail(mine.status, mine.message, ". The rendezvous itself worked: ",
         launch.world_size == 1 ? std::string("the single rank") : cat("all ", launch.world_size, " ranks"),
         " met at ", boot->address());
  throw_if_any_failed(reports, launch.rank);
  return RanksMet{std::move(boot), device};
}

}  // namespace gradcomm::comm
