# The MPI bootstrap's libgradcomm side (the MPI calls are in mpi/, a plugin).
list(APPEND GRADCOMM_COMM_SOURCES mpi/mpi_bootstrap.cpp)
