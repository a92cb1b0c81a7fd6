gradcomm_add_test(gradcomm_bucket_plan_tests
  SOURCES reducer/bucket_plan_test.cpp
  LIBS gradcomm_comm
  LABELS comm)
