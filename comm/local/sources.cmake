list(APPEND GRADCOMM_COMM_SOURCES
  local/rendezvous.cpp
  local/local_transport.cpp
  local/local_reduce_host.cpp
  local/local_kernels.cu)
