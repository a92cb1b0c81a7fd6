#include "comm/mpi/mpi_bootstrap.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "comm/bootstrap/launchers.hpp"
#include "comm/bootstrap/store_protocol.hpp"
#include "comm/mpi/mpi_plugin.hpp"
#include "comm/net/tcp_socket.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {

// What rank 0 broadcasts: a fixed-size record, the same layout on every rank
// (the same libgradcomm everywhere).
struct Rendezvous {
  int32_t status = gcommSuccess;
  int32_t port = 0;
  char addr[256] = {};
  char key[bootstrap::kMaxNameBytes + 1] = {};
  char message[512] = {};
};

void copy_text(char* dst, size_t size, const std::string& text) {
  std::strncpy(dst, text.c_str(), size - 1);
  dst[size - 1] = '\0';
}

// Rank 0's choices (see the header), or an error to broadcast.
Rendezvous choose_rendezvous(const gcommCommConfig_t& c, const bootstrap::EnvLookup& env) {
  Rendezvous r;
  try {
    std::string addr = c.master_addr != nullptr ? c.master_addr : env("MASTER_ADDR").value_or("");
    if (addr.empty()) {
      char host[256] = {};
      require(gethostname(host, sizeof(host) - 1) == 0, "gethostname failed: ", std::strerror(errno));
      addr = host;
    }
    int port = c.master_port != -1 ? c.master_port : 0;
    for (const char* var : {"GRADCOMM_MASTER_PORT", "MASTER_PORT"})
      if (port == 0)
        if (auto text = env(var))
          port = bootstrap::parse_env_int(var, *text, 1, 65535, "the port of rank 0's store");
    if (port == 0) {
      // A free port, from the kernel; released just before the store takes it.
      std::string loopback;
      net::Socket probe = net::listen_on(addr, 0, port, loopback);
    }
    std::string key = c.job_key != nullptr ? c.job_key : env("GRADCOMM_JOB_KEY").value_or("");
    if (key.empty()) key = cat("gradcomm-mpi:", addr, ":", getpid(), ":", port);
    require(addr.size() < sizeof(r.addr), "the master address has ", addr.size(),
            " characters (at most 255)");
    require(key.size() < sizeof(r.key), "the job key has ", key.size(), " bytes; the limit is ",
            bootstrap::kMaxNameBytes);
    r.port = port;
    copy_text(r.addr, sizeof(r.addr), addr);
    copy_text(r.key, sizeof(r.key), key);
  } catch (...) {  // whatever was thrown: rank 0 must still broadcast the record, or the others wait for ever
    try {
      const Error e = as_error(std::current_exception());
      r.status = e.status();
      copy_text(r.message, sizeof(r.message), e.message());
    } catch (...) {
      r.status = gcommOutOfMemory;
      std::snprintf(r.message, sizeof(r.message), "%s", "out of host memory");  // no std::string
    }
  }
  return r;
}

}  // namespace

BootstrapChoice bootstrap_choice(const gcommCommConfig_t& config, const bootstrap::EnvLookup& env) {
  const std::string mode = env("GRADCOMM_BOOTSTRAP").value_or("auto");
  require(mode == "auto" || mode == "mpi" || mode == "tcp", "GRADCOMM_BOOTSTRAP='", mode,
          "' is not auto, mpi or tcp");
  if (mode != "auto") return mode == "mpi" ? BootstrapChoice::kMpi : BootstrapChoice::kTcp;
  if (config.master_addr != nullptr || env("MASTER_ADDR")) return BootstrapChoice::kTcp;
  const bootstrap::Launcher* launcher = bootstrap::choose_launcher(env).launcher;
  if (!bootstrap::is_open_mpi(launcher)) return BootstrapChoice::kTcp;
  auto implied = bootstrap::implied_rendezvous(launcher, env);
  const bool spans_hosts = !implied || implied->addr.empty();
  return spans_hosts ? BootstrapChoice::kMpiIfFound : BootstrapChoice::kTcp;
}

MpiPlace mpi_world(int mpi_comm_f) {
  const MpiPlugin& mpi = mpi_plugin();
  char err[512] = {};
  MpiPlace p;
  if (mpi.world(mpi_comm_f, &p.rank, &p.size, &p.local_rank, err, sizeof(err)) != 0)
    fail(gcommInvalidArgument, "MPI: ", err);
  return p;
}

std::string mpi_place_mismatch(const gcommCommConfig_t& config, const MpiPlace& p, int mpi_comm_f,
                               const bootstrap::EnvLookup& env) {
  if (config.rank != -1 && config.rank != p.rank)
    return cat("config.rank is ", config.rank, " but this process is rank ", p.rank,
               " of the MPI communicator");
  if (config.world_size != -1 && config.world_size != p.size)
    return cat("config.world_size is ", config.world_size, " but the MPI communicator has ", p.size,
               " ranks");
  if (mpi_comm_f != GCOMM_MPI_COMM_WORLD) return "";  // a sub-communicator is the caller's choice
  const bootstrap::LauncherChoice started = bootstrap::choose_launcher(env);
  if (started.launcher == nullptr || bootstrap::is_open_mpi(started.launcher)) return "";
  const int rank = bootstrap::launcher_rank(*started.launcher, env),
            size = bootstrap::launcher_world_size(*started.launcher, env);
  if (rank == p.rank && size == p.size) return "";
  return cat(
      started.launcher->name, " started this process as rank ", rank, " of ", size, ", but MPI's world has ",
      p.size, p.size == 1 ? " rank" : " ranks",
      p.size == 1 ? " (mpirun did not start it, so MPI made it a world of its own)" : "",
      ": GRADCOMM_TRANSPORT=mpi and GRADCOMM_BOOTSTRAP=mpi need the ranks started by mpirun (or an srun "
      "that MPI knows); unset them to meet through MASTER_ADDR");
}

void mpi_bootstrap(const gcommCommConfig_t& config, int mpi_comm_f, const bootstrap::EnvLookup& env,
                   MpiBootstrap& out) {
  const MpiPlugin& mpi = mpi_plugin();
  char err[512] = {};
  const MpiPlace place = mpi_world(mpi_comm_f);
  const std::string mismatch = mpi_place_mismatch(config, place, mpi_comm_f, env);
  require(mismatch.empty(), mismatch);
  const int rank = place.rank, size = place.size, local_rank = place.local_rank;
  Rendezvous r;
  if (rank == 0) r = choose_rendezvous(config, env);
  if (mpi.bcast(mpi_comm_f, &r, static_cast<int>(sizeof(r)), err, sizeof(err)) != 0)
    fail(gcommRemoteError, "MPI bootstrap: ", err);
  if (r.status != gcommSuccess)
    fail(static_cast<gcommStatus_t>(r.status),
         "MPI bootstrap: rank 0 could not choose its store: ", r.message);
  out.master_addr = r.addr;
  out.job_key = r.key;
  out.config = config;
  out.config.rank = rank;
  out.config.world_size = size;
  if (out.config.local_rank == -1) out.config.local_rank = local_rank;
  out.config.master_addr = out.master_addr.c_str();
  out.config.master_port = r.port;
  out.config.job_key = out.job_key.c_str();
  GCOMM_INFO(INIT, "MPI bootstrap: rank ", rank, " of ", size, " (local rank ", local_rank,
             "), rank 0's store at ", net::host_port(out.master_addr, r.port));
}

}  // namespace gradcomm::comm
