#include "comm/bootstrap/launchers.hpp"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "comm/bootstrap/store_protocol.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::bootstrap {

namespace {

const Launcher kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", {{"TORCHELASTIC_RUN_ID"}}};
const Launcher kOpenMpi{"Open MPI",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        {{"PMIX_NAMESPACE"}, {"OMPI_MCA_ess_base_jobid"}, {"OMPI_MCA_orte_ess_jobid"}}};
const Launcher kSlurm{
    "Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", {{"SLURM_JOB_ID", "SLURM_STEP_ID"}}};

bool is_set(const EnvLookup& env, const char* name) {
  return env(name).has_value();
}

// The id of this launch (see Launcher::launch_ids), or "" if the launcher names none.
std::string launch_id(const Launcher& l, const EnvLookup& env) {
  for (const auto& ids : l.launch_ids) {
    std::string id;
    bool complete = true;
    for (const char* name : ids) {
      auto value = env(name);
      complete = complete && value.has_value();
      if (complete) id += cat(id.empty() ? "" : ":", *value);
    }
    if (complete) return id;
  }
  return "";
}

// A port for this launch's store: the same on every rank, likely different for
// the next job on the node (FNV-1a of the launch id), below Linux's ephemeral range.
int port_from(const std::string& id) {
  uint32_t h = 2166136261u;
  for (unsigned char c : id) h = (h ^ c) * 16777619u;
  return 20000 + static_cast<int>(h % 10000);
}

std::string hand_set_values(const EnvLookup& env) {
  std::string s = cat("RANK=", *env("RANK"));
  if (auto ws = env("WORLD_SIZE")) s += cat(" WORLD_SIZE=", *ws);
  return s;
}

// RANK / WORLD_SIZE set by hand (no torchrun) against the launcher that started
// the process. Another world size is refused (every rank sees it alike): a stale
// WORLD_SIZE, or a launcher inside srun/mpirun that starts workers of its own
// (whose RANK would then be the right one). The same world size with another rank
// is a stale RANK: the launcher's per-process rank wins, with a warning.
std::string disagreement(const Launcher& started, const EnvLookup& env) {
  const int rank = launcher_rank(started, env), size = launcher_world_size(started, env);
  const int hand_rank =
      parse_env_int("RANK", *env("RANK"), 0, INT_MAX - 1, "set by hand: no TORCHELASTIC_RUN_ID");
  if (auto ws = env("WORLD_SIZE")) {
    const int hand_size = parse_env_int("WORLD_SIZE", *ws, 1, INT_MAX, "set by hand");
    require(
        hand_size == size, hand_set_values(env),
        " (no TORCHELASTIC_RUN_ID, so not torchrun's) disagree with ", started.rank, "=", rank, " ",
        started.size, "=", size, " set by ", started.name,
        ", which started this process. If RANK and WORLD_SIZE are left from an earlier run, unset them; if "
        "a launcher started by ",
        started.name, " set them for workers of its own, unset ", started.rank, " and ", started.size,
        " in those workers (or start them with torchrun)");
  }
  if (hand_rank == rank) return "";
  return cat(hand_set_values(env),
             " (set by hand or left from an earlier run: no TORCHELASTIC_RUN_ID, so not "
             "torchrun's) disagree with ",
             started.rank, "=", rank, " set by ", started.name,
             ", which started this process, on the same world size: using ", started.name,
             "'s. Unset RANK and WORLD_SIZE to silence this");
}

}  // namespace

int parse_env_int(const std::string& name, const std::string& text, long long lo, long long hi,
                  const char* who) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  bool ok = !text.empty() && (text[0] == '+' || text[0] == '-' || (text[0] >= '0' && text[0] <= '9')) &&
            errno == 0 && end != nullptr && *end == '\0' && v >= lo && v <= hi;
  require(ok, name, "='", text, "' (", who, ") is not an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(v);
}

bool is_open_mpi(const Launcher* l) noexcept {
  return l == &kOpenMpi;
}

int launcher_rank(const Launcher& l, const EnvLookup& env) {
  return parse_env_int(l.rank, *env(l.rank), 0, INT_MAX - 1, l.name);
}

int launcher_world_size(const Launcher& l, const EnvLookup& env) {
  auto text = env(l.size);
  require(text.has_value(), l.size, " is not set although ", l.rank, " is (an incomplete ", l.name,
          " environment); set it, or config.world_size");
  return parse_env_int(l.size, *text, 1, INT_MAX, l.name);
}

LauncherChoice choose_launcher(const EnvLookup& env) {
  const bool torch = is_set(env, "RANK");
  if (torch && is_set(env, "TORCHELASTIC_RUN_ID")) return {&kTorchrun, "", ""};
  const bool slurm = is_set(env, "SLURM_PROCID");
  const bool slurm_step = slurm && is_set(env, "SLURM_STEP_ID");
  const Launcher* started = is_set(env, "OMPI_COMM_WORLD_RANK") ? &kOpenMpi : slurm_step ? &kSlurm : nullptr;
  if (started != nullptr) return {started, torch ? disagreement(*started, env) : "", ""};
  if (torch) return {&kTorchrun, "", ""};
  if (!slurm) return {nullptr, "", ""};
  // Slurm's batch script (sbatch, salloc): SLURM_NTASKS is the allocation's task
  // count, but only this one process runs. It is no launch of ranks: a caller that
  // needs a rank from it is refused at once (batch_refusal), not left waiting for
  // the others; one that needs none (a single-process program) runs.
  const int ntasks = is_set(env, "SLURM_NTASKS") ? launcher_world_size(kSlurm, env) : 1;
  const int procid = launcher_rank(kSlurm, env);
  if (ntasks > 1 && procid == 0 && !slurm_step) {
    LauncherChoice batch;
    batch.batch_refusal = cat("SLURM_NTASKS=", ntasks,
                              " but this process was not started by srun (no "
                              "SLURM_STEP_ID: it is sbatch's batch script, a single process), so the other ",
                              ntasks - 1,
                              " rank(s) would never connect. Start the ranks with srun inside the "
                              "script (srun ./program), or mpirun/torchrun");
    return batch;
  }
  return {&kSlurm, "", ""};
}

std::string default_job_key(const Launcher* launcher, const EnvLookup& env) {
  if (launcher == nullptr) return "gradcomm";
  const std::string id = launch_id(*launcher, env);
  const std::string key = id.empty() ? "gradcomm" : cat("gradcomm:", id);
  return key.size() <= kMaxNameBytes ? key : "gradcomm";
}

std::optional<ImpliedRendezvous> implied_rendezvous(const Launcher* launcher, const EnvLookup& env) {
  if (launcher == &kOpenMpi) {
    auto local = env("OMPI_COMM_WORLD_LOCAL_SIZE"), size = env(kOpenMpi.size);
    const std::string id = launch_id(kOpenMpi, env);
    if (id.empty()) return std::nullopt;
    ImpliedRendezvous r;
    r.port = port_from(id);
    if (local && size && *local == *size) {
      r.addr = "127.0.0.1";
      r.how = cat("every rank is on this host (OMPI_COMM_WORLD_LOCAL_SIZE=", *local, ")");
    } else {
      r.how = "from Open MPI's job id";
    }
    return r;
  }
  if (launcher == &kSlurm && is_set(env, "SLURM_STEP_ID") && is_set(env, "SLURM_JOB_ID")) {
    ImpliedRendezvous r;
    r.port = port_from(launch_id(kSlurm, env));
    auto nodes = env("SLURM_STEP_NUM_NODES");
    if (nodes && *nodes == "1") {
      r.addr = "127.0.0.1";
      r.how = "the job step runs on one node (SLURM_STEP_NUM_NODES=1)";
    } else if (auto list =
                   env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST")) {
      r.addr = slurm_first_host(*list);
      r.how = cat("task 0 runs on the first node of ", *list);
    } else {
      r.how = "from Slurm's job and step ids";
    }
    return r;
  }
  return std::nullopt;
}

std::string slurm_first_host(const std::string& nodelist) {
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    const size_t close = nodelist.find(']', i);
    require(close != std::string::npos, "the Slurm node list '", nodelist, "' has an unclosed '['");
    // The first entry of the range list: "07-09,12" -> "07" (its zero padding kept).
    const std::string ranges = nodelist.substr(i + 1, close - i - 1);
    const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
    require(!first.empty(), "the Slurm node list '", nodelist, "' has an empty range");
    host += first;
    i = close + 1;
  }
  require(!host.empty(), "the Slurm node list '", nodelist, "' names no host");
  return host;
}

}  // namespace gradcomm::comm::bootstrap
