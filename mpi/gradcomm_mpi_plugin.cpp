// libgradcomm_mpi.so.0: the MPI calls of gradcomm's MPI bootstrap (rank, size,
// local rank, one broadcast), behind the C ABI of comm/mpi/mpi_plugin_abi.h.
// Built against the MPI found at build time; libgradcomm loads it on demand.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "comm/mpi/mpi_plugin_abi.h"
#include "gradcomm/comm.h"

namespace {

int failed(const char* what, int code, char* err, size_t err_bytes) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof(text), "error %d", code);
  std::snprintf(err, err_bytes, "%s failed: %s", what, text);
  return 1;
}

MPI_Comm communicator(int comm_f) { return comm_f == GCOMM_MPI_COMM_WORLD ? MPI_COMM_WORLD : MPI_Comm_f2c(comm_f); }

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int gradcomm_mpi_plugin_version(void) { return GRADCOMM_MPI_PLUGIN_VERSION; }

__attribute__((visibility("default"))) int gradcomm_mpi_world(int comm_f, int* rank, int* size, int* local_rank,
                                                              char* err, size_t err_bytes) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) {
    std::snprintf(err, err_bytes, "MPI was already finalized");
    return 1;
  }
  if (!initialized) {
    // The program did not initialize MPI (gradcomm-perf, a Python script): do it,
    // and finalize at exit, as mpirun expects of every process it started.
    int provided = 0;
    int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (code != MPI_SUCCESS) return failed("MPI_Init_thread", code, err, err_bytes);
    std::atexit(finalize_at_exit);
  }
  MPI_Comm comm = communicator(comm_f);
  if (comm == MPI_COMM_NULL) {
    std::snprintf(err, err_bytes, "the communicator (Fortran handle %d) is MPI_COMM_NULL or not a communicator",
                  comm_f);
    return 1;
  }
  int code = MPI_Comm_rank(comm, rank);
  if (code != MPI_SUCCESS) return failed("MPI_Comm_rank", code, err, err_bytes);
  if ((code = MPI_Comm_size(comm, size)) != MPI_SUCCESS) return failed("MPI_Comm_size", code, err, err_bytes);
  MPI_Comm host = MPI_COMM_NULL;
  if ((code = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host)) != MPI_SUCCESS)
    return failed("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", code, err, err_bytes);
  code = MPI_Comm_rank(host, local_rank);
  MPI_Comm_free(&host);
  return code == MPI_SUCCESS ? 0 : failed("MPI_Comm_rank (host)", code, err, err_bytes);
}

__attribute__((visibility("default"))) int gradcomm_mpi_bcast(int comm_f, void* buffer, int bytes, char* err,
                                                              size_t err_bytes) {
  int code = MPI_Bcast(buffer, bytes, MPI_BYTE, 0, communicator(comm_f));
  return code == MPI_SUCCESS ? 0 : failed("MPI_Bcast", code, err, err_bytes);
}

}  // extern "C"
