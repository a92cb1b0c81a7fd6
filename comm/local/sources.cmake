list(APPEND GRADCOMM_COMM_SOURCES
  local/rendezvous.cpp
  local/local_transport.cpp
  local/local_reduce_host.cpp
  local/local_kernels.cu)
# The host reduction loops vectorize at -O3 (16 MiB + 16 MiB float sum: 8.2 ms at
# -O2, 4.9 ms at -O3 on the 2-core VM; the element-at-a-time form took 11.6 ms).
set_source_files_properties(local/local_reduce_host.cpp PROPERTIES COMPILE_OPTIONS "${GRADCOMM_HOST_LOOP_FLAGS}")
