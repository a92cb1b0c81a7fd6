# MPI's libgradcomm side: the plugin loader, the MPI bootstrap and the MPI
# transport (the MPI calls themselves are in mpi/, a plugin opened on demand).
list(APPEND GRADCOMM_COMM_SOURCES
  mpi/mpi_plugin.cpp
  mpi/mpi_bootstrap.cpp
  mpi/mpi_links.cpp
  mpi/mpi_transport.cpp)
