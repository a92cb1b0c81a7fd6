// Under mpirun -np N (N even): the processes split into two MPI communicators by
// the parity of their rank; each half creates a gradcomm communicator with
// gcommCommInitMpi from its communicator's Fortran handle (no MASTER_ADDR), checks
// rank and size against MPI's, all-reduces the world ranks and checks the sum.
// Also: a config rank that disagrees with MPI's is refused. Prints "mpi init ok".
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "gradcomm/gradcomm.h"

namespace {
int fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, gcommGetLastError());
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int half_rank = 0, half_size = 0;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);

  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  cfg.device = gcommHostDevice();
  gcommComm_t bad = nullptr;
  cfg.rank = half_rank + 1;  // not MPI's rank: refused before any MPI call
  if (gcommCommInitMpi(&cfg, MPI_Comm_c2f(half), &bad) != gcommInvalidArgument ||
      std::strstr(gcommGetLastError(), "of the MPI communicator") == nullptr)
    return fail(rank, "a wrong config.rank was not refused");
  cfg.rank = -1;

  gcommComm_t comm = nullptr;
  if (gcommCommInitMpi(&cfg, MPI_Comm_c2f(half), &comm) != gcommSuccess)
    return fail(rank, "gcommCommInitMpi");
  int grank = -1, gsize = 0;
  gcommCommRank(comm, &grank);
  gcommCommSize(comm, &gsize);
  if (grank != half_rank || gsize != half_size) return fail(rank, "rank or size differ from MPI's");
  float mine = static_cast<float>(rank), sum = 0;
  if (gcommAllReduce(comm, &mine, &sum, 1, gcommFloat32, gcommSum, nullptr) != gcommSuccess)
    return fail(rank, "gcommAllReduce");
  float want = 0;
  for (int r = rank % 2; r < size; r += 2) want += static_cast<float>(r);
  if (sum != want) {
    std::fprintf(stderr, "rank %d: sum %g, want %g\n", rank, sum, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  gcommCommDestroy(comm);
  MPI_Comm_free(&half);
  MPI_Finalize();
  std::printf("mpi init ok (rank %d)\n", rank);
  return 0;
}
