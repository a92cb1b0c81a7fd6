// The MPI bootstrap: under mpirun (or any MPI launch), the ranks learn rank 0's
// store address, port and job key through one MPI broadcast instead of
// MASTER_ADDR / MASTER_PORT, as nccl-tests shares its ncclUniqueId; then the
// store-based init proceeds as gcommCommInit. MPI itself is in
// libgradcomm_mpi.so.0 (mpi/, comm/mpi/mpi_plugin_abi.h), opened on demand, so
// libgradcomm never links MPI.
//
// When: gcommCommInitMpi always; gcommCommInitFromEnv when GRADCOMM_BOOTSTRAP=mpi,
// or (GRADCOMM_BOOTSTRAP unset or auto) under Open MPI's mpirun with no MASTER_ADDR
// and no address implied (the ranks span hosts) and the plugin is found.
// GRADCOMM_BOOTSTRAP=tcp never uses it.
#pragma once

#include <string>

#include "comm/bootstrap/launch_env.hpp"
#include "comm/mpi/mpi_plugin.hpp"
#include "gradcomm/comm.h"

namespace gradcomm::comm {

// This process in the MPI communicator (its Fortran handle, or
// GCOMM_MPI_COMM_WORLD; MPI initialized if it was not). Collective.
struct MpiPlace {
  int rank = -1, size = 0, local_rank = -1;
};
MpiPlace mpi_world(int mpi_comm_f);
// Why the config's rank or world size (when set) disagree with MPI's, or "".
// For MPI's world (GCOMM_MPI_COMM_WORLD), also why the launcher that started this
// process (torchrun, srun, a hand-set RANK/WORLD_SIZE; not mpirun) disagrees with
// it: a process mpirun did not start is an MPI world of its own, and would run as
// a world of one and exit 0 (issue 44 #3).
std::string mpi_place_mismatch(const gcommCommConfig_t& config, const MpiPlace& place, int mpi_comm_f,
                               const bootstrap::EnvLookup& env);

// The config with rank, world size, local rank (unless set), master address, port
// and job key filled in from the MPI communicator (its Fortran handle, or
// GCOMM_MPI_COMM_WORLD); collective over it. Rank 0 takes each of address, port
// and key from the config, else MASTER_ADDR / GRADCOMM_MASTER_PORT / MASTER_PORT /
// GRADCOMM_JOB_KEY, else its host name, a free port and a fresh key. A failure on
// rank 0 is broadcast, so every rank fails with it. `storage` owns the strings the
// returned config points to.
struct MpiBootstrap {
  gcommCommConfig_t config;
  std::string master_addr, job_key;
};
void mpi_bootstrap(const gcommCommConfig_t& config, int mpi_comm_f, const bootstrap::EnvLookup& env,
                   MpiBootstrap& out);

// How gcommCommInitFromEnv meets (see above): kMpiIfFound when MPI would serve and
// the plugin decides; throws gcommInvalidArgument for a bad GRADCOMM_BOOTSTRAP.
enum class BootstrapChoice { kTcp, kMpi, kMpiIfFound };
BootstrapChoice bootstrap_choice(const gcommCommConfig_t& config, const bootstrap::EnvLookup& env);

}  // namespace gradcomm::comm
