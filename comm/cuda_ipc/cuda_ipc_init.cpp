// The cuda-ipc transport over a job whose ranks met and which it can serve (the
// transport table asked cuda_ipc_can_serve: comm/cuda_ipc/cuda_ipc_choice.cpp).
#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

using namespace bootstrap;

std::unique_ptr<Transport> make_cuda_ipc_transport(Bootstrap& met, const LaunchConfig& launch,
                                                   gcommDevice_t device);

std::unique_ptr<Transport> make_cuda_ipc_over_job(Bootstrap& met, const LaunchConfig& launch,
                                                  const JobFacts& job, std::string&) {
  GCOMM_INFO(INIT, "rank ", launch.rank, ": cuda-ipc transport: all ", job.size(), " ranks on one GPU (",
             job.ranks[0].gpu, "), which NCCL refuses");
  return make_cuda_ipc_transport(met, launch, launch.device);
}

}  // namespace gradcomm::comm
