list(APPEND GRADCOMM_COMM_SOURCES
  local/rendezvous.cpp
  local/mailbox.cpp
  local/local_transport.cpp)
