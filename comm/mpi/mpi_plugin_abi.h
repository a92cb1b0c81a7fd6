/* What libgradcomm_mpi.so.0 (mpi/, built where MPI is found) exports to
 * libgradcomm, which opens it with dlopen only when an MPI bootstrap is asked for
 * (comm/mpi/mpi_bootstrap.cpp): libgradcomm itself never links MPI, whose ABI
 * differs between implementations. C ABI. Every call returns 0, or non-zero with
 * a NUL-terminated message of at most err_bytes in err. A communicator is named by
 * its Fortran handle (MPI_Comm_c2f), or GCOMM_MPI_COMM_WORLD (-1). */
#ifndef GRADCOMM_MPI_PLUGIN_ABI_H
#define GRADCOMM_MPI_PLUGIN_ABI_H

#include <stddef.h>

#define GRADCOMM_MPI_PLUGIN_VERSION 1

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

#ifdef __cplusplus
}
#endif

#endif /* GRADCOMM_MPI_PLUGIN_ABI_H */
