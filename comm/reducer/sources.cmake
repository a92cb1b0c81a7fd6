list(APPEND GRADCOMM_COMM_SOURCES reducer/bucket_plan.cpp)
