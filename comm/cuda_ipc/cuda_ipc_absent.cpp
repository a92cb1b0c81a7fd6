// comm/cuda_ipc/ in a build without CUDA (GRADCOMM_CUDA=OFF): as on a machine
// without a GPU, the cuda-ipc transport asked for by name is refused before the
// rendezvous (refuse_cuda_ipc_without_a_gpu always throws here), and a CUDA device
// never reaches the table's makers (every rank fails its meeting without a GPU).
#include "comm/cuda_ipc/cuda_ipc_transport.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

std::unique_ptr<Transport> make_cuda_ipc_over_job(bootstrap::Bootstrap&, const bootstrap::LaunchConfig&,
                                                  const JobFacts&, std::string&) {
  fail(gcommNotSupported,
       "the cuda-ipc transport: gradcomm was built without CUDA (GRADCOMM_CUDA=OFF): no CUDA transport");
}

}  // namespace gradcomm::comm
