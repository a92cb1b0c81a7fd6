#include "comm/mpi/mpi_transport.hpp"

#include "comm/exchange/exchange_transport.hpp"
#include "comm/mpi/mpi_bootstrap.hpp"
#include "comm/mpi/mpi_links.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

std::unique_ptr<Transport> make_mpi_transport(const gcommCommConfig_t& config, int mpi_comm_f, double timeout_s) {
  require(config.device.kind == gcommDeviceHost,
          "config.transport is gcommTransportMpi, which moves host memory: set config.device to gcommHostDevice() "
          "(GPUs: gcommTransportNccl, which gcommCommInitMpi meets through MPI too)");
  const MpiPlugin& mpi = mpi_plugin();
  const MpiPlace place = mpi_place(config, mpi_comm_f);
  char err[512] = {};
  int dup = 0, thread_level_ok = 0;
  if (mpi.comm_dup(mpi_comm_f, &dup, &thread_level_ok, err, sizeof(err)) != 0)
    fail(gcommRemoteError, "MPI transport: ", err);
  if (!thread_level_ok)
    GCOMM_WARN("MPI transport: MPI was initialized below MPI_THREAD_SERIALIZED: call gradcomm only from the thread "
               "that initialized MPI, and never while another thread is in MPI");
  set_process_log_rank(place.rank);
  GCOMM_INFO(INIT, "MPI transport: rank ", place.rank, " of ", place.size, " over a duplicate MPI communicator");
  return make_exchange_transport(std::make_unique<MpiLinks>(mpi, dup, place.rank, place.size), gcommTransportMpi,
                                 timeout_s);
}

}  // namespace gradcomm::comm
