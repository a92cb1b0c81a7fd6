# A build without CUDA: comm/nccl/ is replaced by its refusing stand-in.
list(APPEND GRADCOMM_COMM_SOURCES nccl/nccl_version.cpp nccl/nccl_job.cpp nccl_absent/nccl_absent.cpp)
