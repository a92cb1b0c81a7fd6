#include "comm/mpi/mpi_transport.hpp"

#include "comm/exchange/exchange_transport.hpp"
#include "comm/mpi/mpi_bootstrap.hpp"
#include "comm/mpi/mpi_links.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

std::unique_ptr<Transport> make_mpi_transport(const gcommCommConfig_t& config, int mpi_comm_f,
                                              double timeout_s) {
  const MpiPlugin& mpi = mpi_plugin();
  const MpiPlace place = mpi_world(mpi_comm_f);
  // Every rank checks its own config, then all agree before MPI_Comm_dup, which
  // blocks without a timeout: a rank that refused must not leave the others in it.
  std::string refusal = mpi_place_mismatch(config, place, mpi_comm_f, bootstrap::process_environment());
  if (refusal.empty() && config.device.kind != gcommDeviceHost)
    refusal =
        "config.transport is gcommTransportMpi, which moves host memory: set config.device to "
        "gcommHostDevice() (GPUs: gcommTransportNccl, which gcommCommInitMpi meets through MPI too)";
  char err[512] = {};
  int all_ok = 0;
  if (mpi.all_ok(mpi_comm_f, refusal.empty() ? 1 : 0, &all_ok, err, sizeof(err)) != 0)
    fail(gcommRemoteError, "MPI transport: ", err);
  require(refusal.empty(), refusal);
  if (!all_ok)
    fail(gcommRemoteError,
         "MPI transport: another rank of the MPI communicator refused its configuration (its own "
         "error says why)");
  int dup = 0, thread_level = 0;
  if (mpi.comm_dup(mpi_comm_f, &dup, &thread_level, err, sizeof(err)) != 0)
    fail(gcommRemoteError, "MPI transport: ", err);
  if (thread_level < 3)
    GCOMM_WARN(
        "MPI transport: MPI was initialized below MPI_THREAD_MULTIPLE (level ", thread_level,
        " of 0-3): gradcomm calls MPI from the thread that calls it, so drive MPI-transport communicators "
        "from ",
        thread_level < 2 ? "the thread that initialized MPI" : "one thread at a time",
        " and never while another thread is in MPI; the reducers of this communicator run their buckets "
        "in the calling thread (no overlap with backward)");
  set_process_log_rank(place.rank);
  GCOMM_INFO(INIT, "MPI transport: rank ", place.rank, " of ", place.size,
             " over a duplicate MPI communicator");
  return make_exchange_transport(
      std::make_unique<MpiLinks>(mpi, dup, place.rank, place.size, timeout_s, thread_level),
      gcommTransportMpi, timeout_s);
}

}  // namespace gradcomm::comm
