// libgradcomm_mpi.so.0: the MPI calls of gradcomm's MPI bootstrap (rank, size,
// local rank, one broadcast) and of its MPI transport (a duplicate communicator,
// non-blocking sends and receives of bytes, test, cancel), behind the C ABI of
// comm/mpi/mpi_plugin_abi.h. Built against the MPI found at build time;
// libgradcomm loads it on demand.
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

MPI_Comm communicator(int comm_f) {
  return comm_f == GCOMM_MPI_COMM_WORLD ? MPI_COMM_WORLD : MPI_Comm_f2c(comm_f);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int gradcomm_mpi_plugin_version(void) {
  return GRADCOMM_MPI_PLUGIN_VERSION;
}

__attribute__((visibility("default"))) int gradcomm_mpi_world(int comm_f, int* rank, int* size,
                                                              int* local_rank, char* err, size_t err_bytes) {
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
    std::snprintf(err, err_bytes,
                  "the communicator (Fortran handle %d) is MPI_COMM_NULL or not a communicator", comm_f);
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

#define GRADCOMM_MPI_EXPORT extern "C" __attribute__((visibility("default")))

GRADCOMM_MPI_EXPORT int gradcomm_mpi_all_ok(int comm_f, int ok, int* all_ok, char* err, size_t err_bytes) {
  int code = MPI_Allreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, communicator(comm_f));
  return code == MPI_SUCCESS ? 0 : failed("MPI_Allreduce", code, err, err_bytes);
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_comm_dup(int comm_f, int* dup_f, int* thread_level, char* err,
                                              size_t err_bytes) {
  MPI_Comm dup = MPI_COMM_NULL;
  int code = MPI_Comm_dup(communicator(comm_f), &dup);
  if (code != MPI_SUCCESS) return failed("MPI_Comm_dup", code, err, err_bytes);
  if ((code = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
    MPI_Comm_free(&dup);
    return failed("MPI_Comm_set_errhandler", code, err, err_bytes);
  }
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  *thread_level = provided >= MPI_THREAD_MULTIPLE     ? 3
                  : provided >= MPI_THREAD_SERIALIZED ? 2
                  : provided >= MPI_THREAD_FUNNELED   ? 1
                                                      : 0;
  *dup_f = MPI_Comm_c2f(dup);
  return 0;
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_comm_free(int comm_f, char* err, size_t err_bytes) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return 0;  // nothing left to free
  MPI_Comm comm = MPI_Comm_f2c(comm_f);
  int code = MPI_Comm_free(&comm);
  return code == MPI_SUCCESS ? 0 : failed("MPI_Comm_free", code, err, err_bytes);
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_isend(int comm_f, const void* buffer, int bytes, int peer, int tag,
                                           int* request_f, char* err, size_t err_bytes) {
  MPI_Request r = MPI_REQUEST_NULL;
  int code = MPI_Isend(buffer, bytes, MPI_BYTE, peer, tag, MPI_Comm_f2c(comm_f), &r);
  if (code != MPI_SUCCESS) return failed("MPI_Isend", code, err, err_bytes);
  *request_f = MPI_Request_c2f(r);
  return 0;
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_irecv(int comm_f, void* buffer, int bytes, int peer, int tag,
                                           int* request_f, char* err, size_t err_bytes) {
  MPI_Request r = MPI_REQUEST_NULL;
  int code = MPI_Irecv(buffer, bytes, MPI_BYTE, peer, tag, MPI_Comm_f2c(comm_f), &r);
  if (code != MPI_SUCCESS) return failed("MPI_Irecv", code, err, err_bytes);
  *request_f = MPI_Request_c2f(r);
  return 0;
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_test(int* request_f, int* done, int* bytes, char* err,
                                          size_t err_bytes) {
  MPI_Request r = MPI_Request_f2c(*request_f);
  MPI_Status status;
  int code = MPI_Test(&r, done, &status);
  *request_f = MPI_Request_c2f(r);
  // A request that failed (a truncated receive, a lost peer) fails its MPI_Test.
  if (code != MPI_SUCCESS) return failed("MPI_Test", code, err, err_bytes);
  if (*done) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    *bytes = count;
  }
  return 0;
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_cancel(int request_f, char* err, size_t err_bytes) {
  MPI_Request r = MPI_Request_f2c(request_f);
  if (r == MPI_REQUEST_NULL) return 0;
  int code = MPI_Cancel(&r);
  return code == MPI_SUCCESS ? 0 : failed("MPI_Cancel", code, err, err_bytes);
}

GRADCOMM_MPI_EXPORT int gradcomm_mpi_request_free(int* request_f, char* err, size_t err_bytes) {
  MPI_Request r = MPI_Request_f2c(*request_f);
  int code = r == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Request_free(&r);
  *request_f = MPI_Request_c2f(MPI_REQUEST_NULL);
  return code == MPI_SUCCESS ? 0 : failed("MPI_Request_free", code, err, err_bytes);
}
