list(APPEND GRADCOMM_COMM_SOURCES nccl/nccl_transport.cpp)
