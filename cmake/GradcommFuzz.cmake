# GRADCOMM_FUZZ: instrument all host C/C++ code for libFuzzer (coverage) plus
# AddressSanitizer and UndefinedBehaviorSanitizer. CUDA sources are compiled by
# nvcc with its usual host compiler and are not instrumented.
if(GRADCOMM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "GRADCOMM_FUZZ needs clang: configure with -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ (tools/fuzz.sh does)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
                      # See GradcommSanitizers.cmake for why the enum check is off.
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize=enum>)
  add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fsanitize=address,undefined>)
endif()
