gradcomm_add_test(gradcomm_comm_local_tests
  SOURCES local/collectives_test.cpp local/failure_test.cpp local/group_test.cpp
  LIBS gradcomm::gradcomm
  LABELS comm)
if(GRADCOMM_WITH_CUDA)
  gradcomm_add_test(gradcomm_comm_gpu_tests
    SOURCES gpu_test.cpp
    LIBS gradcomm::gradcomm gradcomm_common NCCL::nccl  # it wraps an ncclComm_t of its own
    LABELS comm gpu)
endif()
