list(APPEND GRADCOMM_COMM_SOURCES reducer/bucket_plan.cpp)
# The reducer needs the kernels (pack, unpack) and the allocator.
if(TARGET gradcomm_kernels AND TARGET gradcomm_memory)
  list(APPEND GRADCOMM_COMM_SOURCES reducer/side_stream.cpp reducer/grad_addresses.cpp reducer/reducer.cpp reducer/powersgd.cpp api/reducer_api.cpp)
endif()
