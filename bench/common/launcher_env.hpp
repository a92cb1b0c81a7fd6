// The world size a launcher (torchrun, Open MPI, Slurm) set for this process, in
// gcommCommInitFromEnv's order of precedence; 0 when none did. Tools use it to
// decide whether each process is one rank of a multi-process job.
#pragma once

#include <cstdlib>

namespace gradcomm::bench {

inline int launcher_world_size() {
  const char* pairs[][2] = {{"RANK", "WORLD_SIZE"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (auto& p : pairs) {
    const char* rank = std::getenv(p[0]);
    if (rank == nullptr || *rank == '\0') continue;
    const char* size = std::getenv(p[1]);
    return size != nullptr ? std::atoi(size) : 0;
  }
  return 0;
}

}  // namespace gradcomm::bench
