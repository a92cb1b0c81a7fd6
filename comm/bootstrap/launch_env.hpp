// Where a rank of a multi-process job learns who it is: explicit values in
// gcommCommConfig_t, or the environment its launcher set. Pure functions over an
// environment lookup, so every launcher and every bad value is testable without
// touching the process environment.
//
// Launchers (comm/bootstrap/launchers.hpp says which wins when several left
// variables behind, and warns when a hand-set RANK loses):
//   torchrun  RANK, WORLD_SIZE, LOCAL_RANK                          + MASTER_ADDR, MASTER_PORT
//   Open MPI  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
// The chosen launcher supplies every field the config left unset; fields are never
// mixed across launchers. MASTER_ADDR and MASTER_PORT (the host and port of rank
// 0's store) win when set; else srun and single-host mpirun imply them
// (implied_rendezvous); a world of one needs neither (its store listens on loopback).
//
// The job key (what keeps two jobs on one port apart): config.job_key, else
// GRADCOMM_JOB_KEY, else "gradcomm" joined with the launcher's id of this launch
// (torchrun: TORCHELASTIC_RUN_ID; Open MPI: PMIX_NAMESPACE or its ess job id;
// Slurm: SLURM_JOB_ID and SLURM_STEP_ID), else "gradcomm". Jobs started without
// a launcher id (explicit config, a launcher that names no launch, torchrun's
// default rendezvous id "none") still share the plain default: give them
// distinct GRADCOMM_JOB_KEY values if they may pick the same port.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "gradcomm/comm.h"

namespace gradcomm::comm::bootstrap {

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (unset and empty variables are nullopt).
EnvLookup process_environment();

struct LaunchConfig {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;      // -1: unknown
  std::string master_addr;  // rank 0's host
  int master_port = -1;     // 0 only for a world of one
  std::string job_key;
  gcommDevice_t device{gcommDeviceCuda, -1};        // host, or a CUDA ordinal (resolved from local_rank)
  gcommTransport_t transport = gcommTransportAuto;  // as asked: comm/transports.hpp resolves it
  double timeout_s = 300;
  bool external_store = false;   // the store is not rank 0's (a generation of gradcomm-store)
  std::string source;            // where rank and world size came from, for messages
  std::string launcher_warning;  // hand-set RANK/WORLD_SIZE that lost to the launcher (logged)
  std::string rendezvous_note;   // how the store's address or port was implied (logged at INFO)
};

// gcommCommInitFromEnv: the fields the config sets win; the rest come from the
// launcher's environment. Throws gcommInvalidArgument naming the variable or
// field at fault and what to do.
LaunchConfig launch_from_env(const gcommCommConfig_t& config, const EnvLookup& env);

// The launcher whose rank variable is set (in the order above) and the rank and
// world size it gives, checked as launch_from_env checks them (throws
// gcommInvalidArgument naming the variable); nullopt when no launcher's is set.
struct LauncherPlacement {
  std::string launcher;
  int rank = -1;
  int world_size = 0;
};
std::optional<LauncherPlacement> launcher_placement(const EnvLookup& env);

// gcommCommInit: the config's explicit values only. The environment supplies
// only the defaults of the job key (GRADCOMM_JOB_KEY) and of the timeout
// (GRADCOMM_TIMEOUT_S).
LaunchConfig launch_from_config(const gcommCommConfig_t& config, const EnvLookup& env);

}  // namespace gradcomm::comm::bootstrap
