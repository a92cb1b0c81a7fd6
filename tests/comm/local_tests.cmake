gradcomm_add_test(gradcomm_comm_local_tests
  SOURCES local/collectives_test.cpp local/failure_test.cpp local/group_test.cpp local/flight_record_test.cpp
  LIBS gradcomm::gradcomm
  LABELS comm)
if(GRADCOMM_WITH_CUDA)
  gradcomm_add_test(gradcomm_comm_gpu_tests
    SOURCES gpu_test.cpp
    LIBS gradcomm::gradcomm gradcomm_common NCCL::nccl  # it wraps an ncclComm_t of its own
    LABELS comm gpu)
endif()
# Issue 19: flight records of a frozen rank and of mismatched calls, read by the desync tool.
add_test(NAME comm.desync_report
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_desync.sh $<TARGET_FILE:gradcomm_comm_local_tests>
          ${PROJECT_SOURCE_DIR}/tools/gradcomm_desync.py)
set_tests_properties(comm.desync_report PROPERTIES LABELS comm TIMEOUT 120)
# One suite for every host transport (conformance_test.cpp): every collective,
# dtype and op against the reference, one instantiation per transport.
gradcomm_add_test(gradcomm_comm_conformance_tests
  SOURCES conformance_test.cpp
  LIBS gradcomm::gradcomm
  LABELS comm)
