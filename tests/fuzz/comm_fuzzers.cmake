if(TARGET gradcomm_comm)
  gradcomm_add_fuzzer(gradcomm_fuzz_bucket_plan SOURCES bucket_plan_fuzz.cpp LIBS gradcomm_comm)
endif()
