list(APPEND GRADCOMM_COMM_SOURCES
  communicator.cpp
  known_buffers.cpp
  host_lane.cpp
  flight_recorder.cpp
  group.cpp
  p2p_group.cpp
  api/comm_api.cpp
  api/comm_init_api.cpp
  api/membership_api.cpp
  api/library_info.cpp)
