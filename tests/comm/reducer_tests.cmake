gradcomm_add_test(gradcomm_bucket_plan_tests
  SOURCES reducer/bucket_plan_test.cpp
  LIBS gradcomm_comm
  LABELS comm)
if(TARGET gradcomm_kernels AND TARGET gradcomm_memory)
  gradcomm_add_test(gradcomm_reducer_tests
    SOURCES reducer/reducer_test.cpp reducer/reducer_errors_test.cpp reducer/reducer_powersgd_test.cpp
    LIBS gradcomm::gradcomm gradcomm_common gradcomm_kernels
    LABELS comm)
endif()
if(TARGET gradcomm_kernels AND TARGET gradcomm_memory)
  gradcomm_add_test(gradcomm_reducer_fault_tests
    SOURCES reducer/reducer_faults_test.cpp reducer/reducer_driver_queries_test.cpp
    LIBS gradcomm_comm
    LABELS comm)
endif()
if(TARGET gradcomm_kernels AND TARGET gradcomm_memory)
  gradcomm_add_test(gradcomm_reducer_soak_tests
    SOURCES reducer/reducer_soak_test.cpp
    LIBS gradcomm_comm
    LABELS comm soak)
endif()
