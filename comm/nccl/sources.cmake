list(APPEND GRADCOMM_COMM_SOURCES nccl/nccl_check.cpp nccl/nccl_transport.cpp nccl/store_init.cpp nccl/nccl_api.cpp)
