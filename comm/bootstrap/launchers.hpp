// The launchers a rank can be started by (torchrun, Open MPI's mpirun, Slurm's
// srun), which of them started this process when several left variables behind,
// and the rendezvous they imply when MASTER_ADDR / MASTER_PORT are not set.
//
// Which launcher wins (docs/install.md):
//   1. torchrun, when TORCHELASTIC_RUN_ID says it really started this process: it
//      is the innermost launcher (srun or mpirun may have started torchrun itself);
//   2. Open MPI (OMPI_COMM_WORLD_RANK): mpirun started this process;
//   3. Slurm, in a job step (SLURM_PROCID and SLURM_STEP_ID): srun started it;
//   4. RANK / WORLD_SIZE without TORCHELASTIC_RUN_ID: set by hand;
//   5. Slurm's batch environment (SLURM_PROCID, no step): a world of one only.
// A hand-set WORLD_SIZE that disagrees with the launcher that started the process
// is refused, naming both (a stale one, or a launcher inside srun/mpirun starting
// workers of its own); a hand-set RANK that disagrees on the same world size (left
// over from an earlier run, say) loses, with a warning naming both: the launcher's
// values are per process, so no two ranks ever both get rank 0. sbatch -n N
// running the program directly (no srun) gives no rank: asking for one is refused
// at once, as only one process runs and it would wait the whole timeout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comm/bootstrap/launch_env.hpp"

namespace gradcomm::comm::bootstrap {

struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  const char* local_rank;
  // Variables that name this launch, the same on every rank and different for
  // the next launch: joined, they make the default job key (all must be set).
  std::vector<std::vector<const char*>> launch_ids;
};

struct LauncherChoice {
  const Launcher* launcher = nullptr;  // null: none
  std::string warning;                 // a disagreement that lost, for the log ("" if none)
  std::string batch_refusal;           // sbatch's script, no srun: why no rank can come from it
};

// Throws gcommInvalidArgument for malformed numbers and for a hand-set
// WORLD_SIZE that disagrees with the launcher's.
LauncherChoice choose_launcher(const EnvLookup& env);

// A decimal integer in [lo, hi], nothing else; else gcommInvalidArgument naming
// the variable and `who` sets it.
int parse_env_int(const std::string& name, const std::string& text, long long lo, long long hi,
                  const char* who);

// Whether `l` is Open MPI's mpirun (the launcher the MPI bootstrap serves).
bool is_open_mpi(const Launcher* l) noexcept;

int launcher_rank(const Launcher& l, const EnvLookup& env);
int launcher_world_size(const Launcher& l, const EnvLookup& env);

// "gradcomm" joined with the launcher's id of this launch, else "gradcomm".
std::string default_job_key(const Launcher* launcher, const EnvLookup& env);

// Where rank 0's store is when MASTER_ADDR / MASTER_PORT are unset:
//   Open MPI with every rank on this host (OMPI_COMM_WORLD_LOCAL_SIZE equals the
//   world size): loopback; Slurm in a step: loopback on one node, else the first
//   host of SLURM_STEP_NODELIST (task 0 runs there). The port comes from the
//   launch id (the job and step), in [20000, 30000). nullopt: nothing implied
//   (torchrun sets both; mpirun across hosts needs MASTER_ADDR).
struct ImpliedRendezvous {
  std::string addr;  // "" when only the port is implied
  int port = 0;
  std::string how;  // for messages
};
std::optional<ImpliedRendezvous> implied_rendezvous(const Launcher* launcher, const EnvLookup& env);

// The first host of a Slurm node list ("gpu[07-09,12],login1" -> "gpu07");
// throws gcommInvalidArgument on a malformed list.
std::string slurm_first_host(const std::string& nodelist);

}  // namespace gradcomm::comm::bootstrap
