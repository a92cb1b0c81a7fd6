list(APPEND GRADCOMM_COMM_SOURCES
  exchange/phase_header.cpp
  exchange/message_flows.cpp
  exchange/exchange_transport.cpp)
