/* What libgradcomm_mpi.so.0 (mpi/, built where MPI is found) exports to
 * libgradcomm, which opens it with dlopen only when MPI is asked for (the MPI
 * bootstrap, comm/mpi/mpi_bootstrap.cpp; the MPI transport, comm/mpi/mpi_links.cpp):
 * libgradcomm itself never links MPI, whose ABI differs between implementations.
 * C ABI. Every call returns 0, or non-zero with a NUL-terminated message of at
 * most err_bytes in err. A communicator is named by its Fortran handle
 * (MPI_Comm_c2f), or GCOMM_MPI_COMM_WORLD (-1); a request likewise (MPI_Request_c2f). */
#ifndef GRADCOMM_MPI_PLUGIN_ABI_H
#define GRADCOMM_MPI_PLUGIN_ABI_H

#include <stddef.h>

#define GRADCOMM_MPI_PLUGIN_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*gradcomm_mpi_plugin_version_fn)(void);
/* The caller's rank and world size in the communicator, and its rank among the
 * processes of its host (MPI_COMM_TYPE_SHARED). Initializes MPI (and finalizes it
 * at exit) if the program has not. */
typedef int (*gradcomm_mpi_world_fn)(int comm_f, int* rank, int* size, int* local_rank, char* err,
                                     size_t err_bytes);
/* MPI_Bcast of `bytes` bytes from rank 0 of the communicator. */
typedef int (*gradcomm_mpi_bcast_fn)(int comm_f, void* buffer, int bytes, char* err, size_t err_bytes);

/* The MPI transport (version 2). A duplicate of the communicator, whose errors
 * are returned rather than fatal (MPI_ERRORS_RETURN), and MPI's thread level. */
typedef int (*gradcomm_mpi_comm_dup_fn)(int comm_f, int* dup_f, int* thread_level_ok, char* err, size_t err_bytes);
typedef int (*gradcomm_mpi_comm_free_fn)(int comm_f, char* err, size_t err_bytes);
/* MPI_Isend / MPI_Irecv of `bytes` bytes (MPI_BYTE) with `peer` under `tag`. */
typedef int (*gradcomm_mpi_isend_fn)(int comm_f, const void* buffer, int bytes, int peer, int tag, int* request_f,
                                     char* err, size_t err_bytes);
typedef int (*gradcomm_mpi_irecv_fn)(int comm_f, void* buffer, int bytes, int peer, int tag, int* request_f,
                                     char* err, size_t err_bytes);
/* MPI_Test: *done 1 when complete (the request is then freed and *request_f is
 * the null request), with the bytes received for a receive. */
typedef int (*gradcomm_mpi_test_fn)(int* request_f, int* done, int* bytes, char* err, size_t err_bytes);
/* MPI_Cancel, then up to a second of MPI_Test, then MPI_Request_free if still
 * pending: a cancelled receive never writes after it; a send that could not be
 * cancelled in that time may still complete in the background. */
typedef int (*gradcomm_mpi_cancel_fn)(int* request_f, char* err, size_t err_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GRADCOMM_MPI_PLUGIN_ABI_H */
