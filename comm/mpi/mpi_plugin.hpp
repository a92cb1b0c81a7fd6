// libgradcomm_mpi.so.0 (mpi/, the only code that includes mpi.h), opened with
// dlopen the first time MPI is asked for: GRADCOMM_MPI_PLUGIN (a file: that one
// only), else beside libgradcomm, else the loader's search. Its functions are
// those of comm/mpi/mpi_plugin_abi.h, checked by version.
#pragma once

#include <string>

#include "comm/mpi/mpi_plugin_abi.h"

namespace gradcomm::comm {

struct MpiPlugin {
  gradcomm_mpi_world_fn world = nullptr;
  gradcomm_mpi_bcast_fn bcast = nullptr;
  gradcomm_mpi_all_ok_fn all_ok = nullptr;
  gradcomm_mpi_comm_dup_fn comm_dup = nullptr;
  gradcomm_mpi_comm_free_fn comm_free = nullptr;
  gradcomm_mpi_isend_fn isend = nullptr;
  gradcomm_mpi_irecv_fn irecv = nullptr;
  gradcomm_mpi_test_fn test = nullptr;
  gradcomm_mpi_cancel_fn cancel = nullptr;
  gradcomm_mpi_request_free_fn request_free = nullptr;
  std::string error;  // "" when loaded
};

// The plugin, loaded once; throws gcommNotSupported naming where it looked.
const MpiPlugin& mpi_plugin();

// The plugin could be loaded (why not, otherwise).
bool mpi_plugin_found(std::string* why) noexcept;

}  // namespace gradcomm::comm
