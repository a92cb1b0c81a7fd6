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

/* The MPI transport (version 2). Whether every process of the communicator
 * passes `ok` non-zero (MPI_Allreduce with MPI_MIN): the ranks agree before a
 * blocking collective, so one rank's refusal cannot leave the others waiting. */
typedef int (*gradcomm_mpi_all_ok_fn)(int comm_f, int ok, int* all_ok, char* err, size_t err_bytes);
/* A duplicate of the communicator, whose errors are returned rather than fatal
 * (MPI_ERRORS_RETURN), and MPI's thread level: 0 single, 1 funneled, 2
 * serialized, 3 multiple. */
typedef int (*gradcomm_mpi_comm_dup_fn)(int comm_f, int* dup_f, int* thread_level, char* err,
                                        size_t err_bytes);
typedef int (*gradcomm_mpi_comm_free_fn)(int comm_f, char* err, size_t err_bytes);
/* MPI_Isend / MPI_Irecv of `bytes` bytes (MPI_BYTE) with `peer` under `tag`. */
typedef int (*gradcomm_mpi_isend_fn)(int comm_f, const void* buffer, int bytes, int peer, int tag,
                                     int* request_f, char* err, size_t err_bytes);
typedef int (*gradcomm_mpi_irecv_fn)(int comm_f, void* buffer, int bytes, int peer, int tag, int* request_f,
                                     char* err, size_t err_bytes);
/* MPI_Test: *done 1 when complete (the request is then freed and *request_f is
 * the null request), with the bytes received for a receive. */
typedef int (*gradcomm_mpi_test_fn)(int* request_f, int* done, int* bytes, char* err, size_t err_bytes);
/* MPI_Cancel (the request stays to be completed with test, or freed). */
typedef int (*gradcomm_mpi_cancel_fn)(int request_f, char* err, size_t err_bytes);
/* MPI_Request_free: the operation may still complete in the background. */
typedef int (*gradcomm_mpi_request_free_fn)(int* request_f, char* err, size_t err_bytes);

#ifdef __cplusplus
}
#endif

#endif /* GRADCOMM_MPI_PLUGIN_ABI_H */
