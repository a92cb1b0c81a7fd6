# Fault tolerance: the membership server (gradcomm-store) and its members' client.
list(APPEND GRADCOMM_COMM_SOURCES
  membership/membership_state.cpp
  membership/membership_server.cpp
  membership/membership_client.cpp
  membership/frame_io.cpp)
