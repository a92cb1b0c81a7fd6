// The world size a launcher (torchrun, Open MPI, Slurm) set for this process, as
// the library parses it (gcommGetLauncherRank); 0 when none did. Tools use it to
// decide whether each process is one rank of a multi-process job. A malformed
// launcher environment (WORLD_SIZE=abc, RANK without WORLD_SIZE) is an error the
// tool reports and exits on, never a silent fallback to a one-process run.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "gradcomm/gradcomm.h"

namespace gradcomm::bench {

// False (after printing "<tool>: <the library's message>") when the launcher's
// variables are malformed; the caller exits with status 2.
inline bool launcher_world_size(const char* tool, int& world) {
  int rank = -1;
  world = 0;
  if (gcommGetLauncherRank(&rank, &world) == gcommSuccess) return true;
  std::fprintf(stderr, "%s: the launcher's environment is not usable: %s\n", tool, gcommGetLastError());
  return false;
}

// This process's local rank as a launcher sets it (torchrun's LOCAL_RANK, Open
// MPI's OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID: the variables the
// library reads for config.local_rank), 0 when none is set.
inline int launcher_local_rank() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

}  // namespace gradcomm::bench
