#include "comm/mpi/mpi_bootstrap.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "comm/bootstrap/launchers.hpp"
#include "comm/bootstrap/wire.hpp"
#include "comm/mpi/mpi_plugin_abi.h"
#include "comm/net/tcp_socket.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/library_folder.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

namespace {

constexpr const char* kPlugin = "libgradcomm_mpi.so.0";

struct Plugin {
  gradcomm_mpi_world_fn world = nullptr;
  gradcomm_mpi_bcast_fn bcast = nullptr;
  std::string error;  // "" when loaded
};

// GRADCOMM_MPI_PLUGIN (a file: that one only), else beside libgradcomm, else the
// loader's search.
Plugin load_plugin() {
  Plugin p;
  std::vector<std::string> candidates;
  if (auto file = env_string("GRADCOMM_MPI_PLUGIN")) {
    candidates.push_back(*file);
  } else {
    const std::string here = library_folder();
    if (!here.empty()) candidates.push_back(here + "/" + kPlugin);
    candidates.push_back(kPlugin);
  }
  std::string tried;
  for (const std::string& file : candidates) {
    dlerror();
    // Global: Open MPI's own components, which it opens later, resolve against libmpi.
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      tried += cat(tried.empty() ? "" : "; ", e != nullptr ? e : file.c_str());
      continue;
    }
    auto version = reinterpret_cast<gradcomm_mpi_plugin_version_fn>(dlsym(handle, "gradcomm_mpi_plugin_version"));
    p.world = reinterpret_cast<gradcomm_mpi_world_fn>(dlsym(handle, "gradcomm_mpi_world"));
    p.bcast = reinterpret_cast<gradcomm_mpi_bcast_fn>(dlsym(handle, "gradcomm_mpi_bcast"));
    if (version != nullptr && version() == GRADCOMM_MPI_PLUGIN_VERSION && p.world != nullptr && p.bcast != nullptr)
      return p;
    tried += cat(tried.empty() ? "" : "; ", file, ": not gradcomm's MPI plugin of version ",
                 GRADCOMM_MPI_PLUGIN_VERSION);
    dlclose(handle);
  }
  p.world = nullptr;
  p.bcast = nullptr;
  p.error = cat("gradcomm's MPI bootstrap (", kPlugin, ", built where MPI is found at build time) could not be "
                "loaded: ", tried, ". Build gradcomm with MPI (apt-get install libopenmpi-dev), set "
                "GRADCOMM_MPI_PLUGIN to the file, or set MASTER_ADDR and MASTER_PORT instead");
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load_plugin();
  if (!p.error.empty()) fail(gcommNotSupported, p.error);
  return p;
}

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
        if (auto text = env(var)) port = bootstrap::parse_env_int(var, *text, 1, 65535, "the port of rank 0's store");
    if (port == 0) {
      // A free port, from the kernel; released just before the store takes it.
      std::string loopback;
      net::Socket probe = net::listen_on(addr, 0, port, loopback);
    }
    std::string key = c.job_key != nullptr ? c.job_key : env("GRADCOMM_JOB_KEY").value_or("");
    if (key.empty()) key = cat("gradcomm-mpi:", addr, ":", getpid(), ":", port);
    require(addr.size() < sizeof(r.addr), "the master address has ", addr.size(), " characters (at most 255)");
    require(key.size() < sizeof(r.key), "the job key has ", key.size(), " bytes; the limit is ",
            bootstrap::kMaxNameBytes);
    r.port = port;
    copy_text(r.addr, sizeof(r.addr), addr);
    copy_text(r.key, sizeof(r.key), key);
  } catch (const Error& e) {
    r.status = e.status();
    copy_text(r.message, sizeof(r.message), e.message());
  }
  return r;
}

}  // namespace

bool mpi_plugin_found(std::string* why) noexcept {
  try {
    plugin();
    return true;
  } catch (const Error& e) {
    if (why != nullptr) *why = e.message();
  } catch (...) {
  }
  return false;
}

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

void mpi_bootstrap(const gcommCommConfig_t& config, int mpi_comm_f, const bootstrap::EnvLookup& env,
                   MpiBootstrap& out) {
  const Plugin& mpi = plugin();
  char err[512] = {};
  int rank = -1, size = 0, local_rank = -1;
  if (mpi.world(mpi_comm_f, &rank, &size, &local_rank, err, sizeof(err)) != 0)
    fail(gcommInvalidArgument, "MPI bootstrap: ", err);
  require(config.rank == -1 || config.rank == rank, "config.rank is ", config.rank, " but this process is rank ",
          rank, " of the MPI communicator");
  require(config.world_size == -1 || config.world_size == size, "config.world_size is ", config.world_size,
          " but the MPI communicator has ", size, " ranks");
  Rendezvous r;
  if (rank == 0) r = choose_rendezvous(config, env);
  if (mpi.bcast(mpi_comm_f, &r, static_cast<int>(sizeof(r)), err, sizeof(err)) != 0)
    fail(gcommRemoteError, "MPI bootstrap: ", err);
  if (r.status != gcommSuccess)
    fail(static_cast<gcommStatus_t>(r.status), "MPI bootstrap: rank 0 could not choose its store: ", r.message);
  out.master_addr = r.addr;
  out.job_key = r.key;
  out.config = config;
  out.config.rank = rank;
  out.config.world_size = size;
  if (out.config.local_rank == -1) out.config.local_rank = local_rank;
  out.config.master_addr = out.master_addr.c_str();
  out.config.master_port = r.port;
  out.config.job_key = out.job_key.c_str();
  GCOMM_INFO(INIT, "MPI bootstrap: rank ", rank, " of ", size, " (local rank ", local_rank, "), rank 0's store at ",
             net::host_port(out.master_addr, r.port));
}

}  // namespace gradcomm::comm
