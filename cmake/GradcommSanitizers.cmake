# GRADCOMM_SANITIZE applies to host C/C++ code (nvcc device code is never
# instrumented). Example: -DGRADCOMM_SANITIZE="address;undefined".
if(GRADCOMM_SANITIZE)
  string(REPLACE ";" "," _gradcomm_san "${GRADCOMM_SANITIZE}")
  add_compile_options(
    $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${_gradcomm_san}>
    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fsanitize=${_gradcomm_san},-fno-omit-frame-pointer>)
  # Only host links: nvcc device-link steps must not see the flag.
  add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${_gradcomm_san}>)
  message(STATUS "gradcomm: sanitizers: ${_gradcomm_san}")
endif()
