list(APPEND GRADCOMM_COMM_SOURCES nccl/nccl_transport.cpp nccl/store_init.cpp)
