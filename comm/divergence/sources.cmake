list(APPEND GRADCOMM_COMM_SOURCES divergence/divergence_check.cpp)
