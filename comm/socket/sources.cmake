list(APPEND GRADCOMM_COMM_SOURCES
  socket/peer_mesh.cpp
  socket/peer_links.cpp
  socket/socket_transport.cpp)
