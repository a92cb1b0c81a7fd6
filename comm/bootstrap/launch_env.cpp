#include "comm/bootstrap/launch_env.hpp"

#include <climits>
#include <cstdlib>
#include <vector>

#include "comm/bootstrap/launchers.hpp"
#include "comm/bootstrap/store_protocol.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm::bootstrap {

namespace {

// An integer field of the config: -1 is "unset"; anything else must be >= lo.
bool config_int(int value, const char* field, int lo) {
  if (value == -1) return false;
  require(value >= lo, "config.", field, " is ", value, ": use a value >= ", lo, ", or -1 to leave it unset");
  return true;
}

LaunchConfig resolve(const gcommCommConfig_t& c, const EnvLookup& env, bool use_env) {
  LaunchConfig lc;
  lc.transport = c.transport;  // resolved by the transport table (comm/transports.hpp)
  require(!(c.timeout_s != c.timeout_s), "config.timeout_s is NaN");
  lc.timeout_s = c.timeout_s > 0 ? c.timeout_s : knobs::timeout_seconds();

  LauncherChoice choice = use_env ? choose_launcher(env) : LauncherChoice{};
  const Launcher* launcher = choice.launcher;
  lc.launcher_warning = choice.warning;
  lc.source = launcher != nullptr ? cat(launcher->name, " environment") : "config";
  std::optional<ImpliedRendezvous> implied = use_env ? implied_rendezvous(launcher, env) : std::nullopt;

  if (c.job_key != nullptr) {
    lc.job_key = c.job_key;
    require(!lc.job_key.empty(), "config.job_key is empty: use NULL for the default, or a non-empty string");
  } else if (auto key = env("GRADCOMM_JOB_KEY")) {
    lc.job_key = *key;
  } else {
    lc.job_key = default_job_key(launcher, env);
  }
  require(lc.job_key.size() <= kMaxNameBytes, "the job key has ", lc.job_key.size(), " bytes; the limit is ",
          kMaxNameBytes);

  std::string rank_from = "config.rank", world_from = "config.world_size";
  if (config_int(c.rank, "rank", 0)) {
    lc.rank = c.rank;
  } else if (launcher != nullptr) {
    lc.rank = launcher_rank(*launcher, env);
    rank_from = launcher->rank;
  } else {
    require(choice.batch_refusal.empty(), choice.batch_refusal);
    require(false,
            use_env
                ? "no rank: config.rank is -1 and none of RANK (torchrun), OMPI_COMM_WORLD_RANK (Open "
                  "MPI), SLURM_PROCID (Slurm) is set; start the job with torchrun, mpirun or srun, or set "
                  "config.rank and config.world_size"
                : "config.rank is required (>= 0)");
  }
  if (config_int(c.world_size, "world_size", 1)) {
    lc.world_size = c.world_size;
  } else if (launcher != nullptr) {
    lc.world_size = launcher_world_size(*launcher, env);
    world_from = launcher->size;
  } else {
    require(choice.batch_refusal.empty(), choice.batch_refusal);
    require(false, use_env ? "no world size: config.world_size is -1 and no launcher's variables are set"
                           : "config.world_size is required (>= 1)");
  }
  require(lc.rank < lc.world_size, rank_from, "=", lc.rank, " is not below ", world_from, "=", lc.world_size,
          " (ranks are 0..", lc.world_size - 1, ")");

  if (config_int(c.local_rank, "local_rank", 0)) {
    lc.local_rank = c.local_rank;
  } else if (auto text = launcher != nullptr ? env(launcher->local_rank) : std::nullopt) {
    lc.local_rank = parse_env_int(launcher->local_rank, *text, 0, INT_MAX, launcher->name);
  }

  if (c.master_addr != nullptr) {
    lc.master_addr = c.master_addr;
    require(!lc.master_addr.empty(), "config.master_addr is empty: use NULL to leave it unset");
  } else if (use_env) {
    lc.master_addr = env("MASTER_ADDR").value_or(implied ? implied->addr : "");
    if (!env("MASTER_ADDR") && !lc.master_addr.empty())
      lc.rendezvous_note += cat("address ", implied->how, "; ");
  }
  if (lc.master_addr.empty()) {
    require(
        lc.world_size == 1,
        use_env
            ? "MASTER_ADDR is not set (nor config.master_addr): rank 0's store listens on that host and the "
              "other ranks connect to it. torchrun sets it, srun and single-host mpirun imply it; mpirun "
              "across hosts meets through MPI when gradcomm's MPI plugin is installed "
              "(libgradcomm_mpi.so.0), "
              "else needs MASTER_ADDR=<rank 0's host> exported to every rank (mpirun -x MASTER_ADDR)"
            : "config.master_addr is required when world_size > 1: the host of rank 0, whose store listens "
              "on "
              "config.master_port");
    lc.master_addr = "127.0.0.1";
  }
  require(lc.master_addr.size() <= 255, "the master address has ", lc.master_addr.size(),
          " characters (at most 255)");

  if (c.master_port != -1) {
    require(c.master_port >= 0 && c.master_port <= 65535, "config.master_port is ", c.master_port,
            ": use a TCP port in [1, 65535], or -1 to leave it unset");
    lc.master_port = c.master_port;
  } else if (auto own = use_env ? env("GRADCOMM_MASTER_PORT") : std::nullopt) {
    lc.master_port = parse_env_int("GRADCOMM_MASTER_PORT", *own, 1, 65535, "the port of rank 0's store");
  } else if (auto text = use_env ? env("MASTER_PORT") : std::nullopt) {
    lc.master_port = parse_env_int("MASTER_PORT", *text, 1, 65535, "the port of rank 0's store");
    // Under torchrun (TORCHELASTIC_RUN_ID) MASTER_PORT is taken: torchrun's agent
    // listens there itself (the TCPStore that torch.distributed workers share), so
    // gradcomm's store takes the next port, the same on every rank.
    if (env("TORCHELASTIC_RUN_ID")) {
      require(lc.master_port < 65535,
              "MASTER_PORT=65535 under torchrun, whose agent holds that port: gradcomm's "
              "store would listen on MASTER_PORT + 1; set GRADCOMM_MASTER_PORT to a free port instead");
      lc.master_port += 1;
    }
  } else if (implied) {
    lc.master_port = implied->port;
    lc.rendezvous_note +=
        cat("port ", lc.master_port, " from the launch id (set MASTER_PORT if it is taken)");
  } else {
    require(
        lc.world_size == 1,
        use_env
            ? "MASTER_PORT is not set (nor config.master_port): the TCP port of rank 0's store, the same on "
              "every rank (torchrun sets it; otherwise export one, e.g. MASTER_PORT=29500)"
            : "config.master_port is required when world_size > 1");
    lc.master_port = 0;
  }
  // A world of one has no peer that must find its store: a port from the environment
  // (often torch.distributed's, still held by its own store) is not bound; any free
  // port is. A port the caller put in the config is kept.
  if (lc.world_size == 1 && c.master_port == -1) lc.master_port = 0;
  require(lc.master_port != 0 || lc.world_size == 1,
          "port 0 (any free port) works only for a world of one: the other ranks must know rank 0's port");

  const gcommDevice_t& d = c.device;
  if (d.kind == gcommDeviceHost) {
    lc.device = gcommHostDevice();
  } else {
    require(d.kind == gcommDeviceCuda, "config.device.kind ", static_cast<int>(d.kind),
            " is neither gcommDeviceHost nor gcommDeviceCuda");
    require(d.ordinal >= -1, "config.device.ordinal is ", d.ordinal,
            ": use a CUDA ordinal >= 0, or -1 to take it from the local rank");
    int ordinal = d.ordinal >= 0 ? d.ordinal : lc.local_rank;
    require(ordinal >= 0,
            use_env ? "no GPU chosen: set config.device, config.local_rank, or the launcher's local "
                      "rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID)"
                    : "no GPU chosen: set config.device.ordinal or config.local_rank");
    lc.device = gcommCudaDevice(ordinal);
  }
  return lc;
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) { return env_string(name.c_str()); };
}

LaunchConfig launch_from_env(const gcommCommConfig_t& config, const EnvLookup& env) {
  LaunchConfig lc = resolve(config, env, true);
  if (!lc.launcher_warning.empty()) GCOMM_WARN(lc.launcher_warning);
  if (!lc.rendezvous_note.empty())
    GCOMM_INFO(INIT, "rank 0's store at ", lc.master_addr, ":", lc.master_port, " (", lc.rendezvous_note,
               ")");
  return lc;
}

LaunchConfig launch_from_config(const gcommCommConfig_t& config, const EnvLookup& env) {
  return resolve(config, env, false);
}

std::optional<LauncherPlacement> launcher_placement(const EnvLookup& env) {
  const Launcher* launcher = choose_launcher(env).launcher;
  if (launcher == nullptr) return std::nullopt;
  LauncherPlacement p;
  p.launcher = launcher->name;
  p.rank = launcher_rank(*launcher, env);
  p.world_size = launcher_world_size(*launcher, env);
  require(p.rank < p.world_size, launcher->rank, "=", p.rank, " is not below ", launcher->size, "=",
          p.world_size, " (ranks are 0..", p.world_size - 1, ")");
  return p;
}

}  // namespace gradcomm::comm::bootstrap
