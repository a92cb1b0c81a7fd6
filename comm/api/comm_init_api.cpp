// C API: communicators of a multi-process job that meet through gradcomm's
// rendezvous store (include/gradcomm/comm.h: gcommCommInit, gcommCommInitFromEnv).
#include "comm/api/publish.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/mpi/mpi_bootstrap.hpp"
#include "comm/mpi/mpi_transport.hpp"
#include "comm/transports.hpp"
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/log.hpp"

using namespace gradcomm;
using namespace gradcomm::comm;

namespace {

// The MPI transport: no store to meet, MPI is the wire (comm/mpi/mpi_transport.hpp).
gcommComm_t create_mpi(const gcommCommConfig_t& c, int mpi_comm_f) {
  return publish_communicator(make_mpi_transport(c, mpi_comm_f, timeout_from(c)), timeout_from(c));
}

gcommComm_t create(const bootstrap::LaunchConfig& launch) {
  set_process_log_rank(launch.rank);
  return publish_communicator(make_transport_from_store(launch), launch.timeout_s);
}

}  // namespace

extern "C" {

GCOMM_API gcommStatus_t gcommCommInitFromEnv(const gcommCommConfig_t* config, gcommComm_t* comm) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(comm);
    const gcommCommConfig_t defaults = GCOMM_COMM_CONFIG_INITIALIZER;
    gcommCommConfig_t c = read_config(config, defaults, "gcommCommConfig_t");
    c.transport = transport_or_env(c.transport);
    if (c.transport == gcommTransportMpi) {
      *comm = create_mpi(c, GCOMM_MPI_COMM_WORLD);
      return;
    }
    const bootstrap::EnvLookup env = bootstrap::process_environment();
    const BootstrapChoice choice = bootstrap_choice(c, env);
    if (choice == BootstrapChoice::kMpi ||
        (choice == BootstrapChoice::kMpiIfFound && mpi_plugin_found(nullptr))) {
      MpiBootstrap met;
      mpi_bootstrap(c, GCOMM_MPI_COMM_WORLD, env, met);
      *comm = create(bootstrap::launch_from_config(met.config, env));
      return;
    }
    *comm = create(bootstrap::launch_from_env(c, env));
  });
}

GCOMM_API gcommStatus_t gcommCommInitMpi(const gcommCommConfig_t* config, int mpi_comm_fortran,
                                         gcommComm_t* comm) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(comm);
    const gcommCommConfig_t defaults = GCOMM_COMM_CONFIG_INITIALIZER;
    gcommCommConfig_t c = read_config(config, defaults, "gcommCommConfig_t");
    c.transport = transport_or_env(c.transport);
    if (c.transport == gcommTransportMpi) {
      *comm = create_mpi(c, mpi_comm_fortran);
      return;
    }
    const bootstrap::EnvLookup env = bootstrap::process_environment();
    MpiBootstrap met;
    mpi_bootstrap(c, mpi_comm_fortran, env, met);
    *comm = create(bootstrap::launch_from_config(met.config, env));
  });
}

GCOMM_API gcommStatus_t gcommGetLauncherRank(int* rank, int* world_size) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(rank);
    GCOMM_REQUIRE_NOT_NULL(world_size);
    auto placement = bootstrap::launcher_placement(bootstrap::process_environment());
    *rank = placement ? placement->rank : -1;
    *world_size = placement ? placement->world_size : 0;
  });
}

GCOMM_API gcommStatus_t gcommCommInit(const gcommCommConfig_t* config, gcommComm_t* comm) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(comm);
    GCOMM_REQUIRE_NOT_NULL(config);
    const gcommCommConfig_t defaults = GCOMM_COMM_CONFIG_INITIALIZER;
    gcommCommConfig_t c = read_config(config, defaults, "gcommCommConfig_t");
    // As in InitFromEnv: the variable chooses where the config left it to chance
    // (the network lab keeps ranks of one host on TCP with it).
    c.transport = transport_or_env(c.transport);
    *comm = create(bootstrap::launch_from_config(c, bootstrap::process_environment()));
  });
}

}  // extern "C"
