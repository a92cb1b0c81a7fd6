list(APPEND GRADCOMM_COMM_SOURCES
  socket/peer_mesh.cpp
  socket/socket_links.cpp
  socket/socket_transport.cpp)
