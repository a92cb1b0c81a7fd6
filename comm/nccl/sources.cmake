list(APPEND GRADCOMM_COMM_SOURCES nccl/nccl_version.cpp nccl/nccl_library.cpp nccl/nccl_search.cpp nccl/nccl_check.cpp nccl/nccl_transport.cpp nccl/nccl_job.cpp nccl/store_init.cpp nccl/nccl_api.cpp)
