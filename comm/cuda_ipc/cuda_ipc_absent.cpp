// comm/cuda_ipc/ in a build without CUDA (GRADCOMM_CUDA=OFF): as on a machine
// without a GPU, the cuda-ipc transport is refused before the rendezvous, and
// auto's CUDA choice fails every rank with the reason after the ranks met
// (meet_as_nccl_rank finds no GPU in this build, so it always throws).
#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "comm/cuda_ipc/gpu_sharing.hpp"
#include "comm/nccl/store_meet.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

namespace {
constexpr const char* kWhy = "gradcomm was built without CUDA (GRADCOMM_CUDA=OFF): no CUDA transport";
}

std::unique_ptr<Transport> make_cuda_ipc_transport_from_store(const bootstrap::LaunchConfig&) {
  refuse_cuda_ipc_without_a_gpu();  // no GPU is usable in this build: it always throws
  fail(gcommNotSupported, "the cuda-ipc transport: ", kWhy);
}

std::unique_ptr<Transport> make_cuda_transport_from_store(const bootstrap::LaunchConfig& launch) {
  (void)meet_as_nccl_rank(launch, [] { return std::string(kWhy); });
  fail(gcommNotSupported, "the CUDA transports: ", kWhy);
}

}  // namespace gradcomm::comm
