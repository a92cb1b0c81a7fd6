list(APPEND GRADCOMM_COMM_SOURCES
  exchange/peer_exchange.cpp
  exchange/phase_header.cpp
  exchange/message_flows.cpp
  exchange/exchange_transport.cpp)
