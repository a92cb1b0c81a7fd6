# The communicator's own logic, with fake transports (comm/communicator.cpp,
# comm/group.cpp), the transport table, and NCCL's version gating.
set(GRADCOMM_COMM_NCCL_TESTS)
if(GRADCOMM_WITH_CUDA)
  set(GRADCOMM_COMM_NCCL_TESTS nccl_version_test.cpp nccl_search_test.cpp)
endif()
gradcomm_add_test(gradcomm_comm_core_tests
  SOURCES group_launch_test.cpp transports_test.cpp host_lane_test.cpp flight_recorder_test.cpp exchange_transport_test.cpp peer_memory_collective_test.cpp known_buffers_test.cpp divergence_check_test.cpp ${GRADCOMM_COMM_NCCL_TESTS}
  LIBS gradcomm_comm
  LABELS comm)
# Issue 18: host programs start and run with NCCL hidden; asking for NCCL then
# fails naming where it looked.
# Not in sanitizer builds: it loads the library into an uninstrumented python3.
if(GRADCOMM_BUILD_TOOLS AND GRADCOMM_WITH_CUDA AND NOT GRADCOMM_SANITIZE)
  add_test(NAME comm.host_programs_run_without_nccl
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_without_nccl.sh $<TARGET_FILE:gradcomm>
      $<TARGET_FILE:gradcomm-info> $<TARGET_FILE:gradcomm-perf> $<TARGET_FILE:gradcomm_comm_core_tests>)
  set_tests_properties(comm.host_programs_run_without_nccl PROPERTIES LABELS "comm;tools" TIMEOUT 300)
endif()
