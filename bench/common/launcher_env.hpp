// The world size a launcher (torchrun, Open MPI, Slurm) set for this process, as
// the library parses it (gcommGetLauncherRank); 0 when none did. Tools use it to
// decide whether each process is one rank of a multi-process job. A malformed
// launcher environment (WORLD_SIZE=abc, RANK without WORLD_SIZE) is an error the
// tool reports and exits on, never a silent fallback to a one-process run.
#pragma once

#include <stdexcept>
#include <string>

#include "gradcomm/gradcomm.h"

namespace gradcomm::bench {

// Throws std::runtime_error with the library's message.
inline int launcher_world_size() {
  int rank = -1, world = 0;
  if (gcommGetLauncherRank(&rank, &world) != gcommSuccess)
    throw std::runtime_error(std::string("the launcher's environment is not usable: ") + gcommGetLastError());
  return world;
}

}  // namespace gradcomm::bench
