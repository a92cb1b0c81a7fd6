// What NCCL asks of a job, NCCL-free (compiled in a build without CUDA too): a GPU
// of its own for every rank and NCCL loadable in every rank's process (the
// transport table's question, comm/transports.hpp), and gcommCommInitAll's device list.
#pragma once

#include <string>
#include <vector>

#include "comm/job_facts.hpp"

namespace gradcomm::comm {

// Whether NCCL can serve the job: CUDA ranks, a GPU each, NCCL loadable in each. Pure.
Fit nccl_can_serve(const JobFacts& job);

// gcommCommInitAll's device list, checked before it is read or anything is sized
// by ndev: the list (0..ndev-1 when devices is null), each a visible GPU, none twice.
std::vector<int> nccl_device_list(int ndev, const int* devices);

}  // namespace gradcomm::comm
