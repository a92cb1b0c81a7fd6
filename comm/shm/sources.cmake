list(APPEND GRADCOMM_COMM_SOURCES
  shm/shm_segment.cpp
  shm/shm_links.cpp
  shm/shm_transport.cpp)
