list(APPEND GRADCOMM_COMM_SOURCES
  bootstrap/store_protocol.cpp
  bootstrap/store_state.cpp
  bootstrap/store_server.cpp
  bootstrap/store_client.cpp
  bootstrap/bootstrap.cpp
  bootstrap/launchers.cpp
  bootstrap/launch_env.cpp)
