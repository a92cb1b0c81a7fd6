# GRADCOMM_SANITIZE applies to host C/C++ code (nvcc device code is never
# instrumented). Example: -DGRADCOMM_SANITIZE="address;undefined".
if(GRADCOMM_SANITIZE)
  string(REPLACE ";" "," _gradcomm_san "${GRADCOMM_SANITIZE}")
  # -O1 -g1 (after the build type's -O2 -g, so they win): the sanitizers' own advice
  # for speed, and line tables are all their reports need. UBSan's checks at -O2 -g
  # made the ASan+UBSan build 3.6x the ThreadSanitizer one; -O1 -g1 halves it (a
  # heavy file: 50 s -> 22 s on the 2-core VM).
  add_compile_options(
    $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${_gradcomm_san}>
    $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
    $<$<COMPILE_LANGUAGE:C,CXX>:-O1>
    $<$<COMPILE_LANGUAGE:C,CXX>:-g1>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fno-omit-frame-pointer>)
  # nvcc splits -Xcompiler values at commas: one flag per sanitizer.
  foreach(_san ${GRADCOMM_SANITIZE})
    add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fsanitize=${_san}>)
  endforeach()
  # Only host links: nvcc device-link steps must not see the flag.
  add_link_options($<$<LINK_LANGUAGE:C,CXX>:-fsanitize=${_gradcomm_san}>)
  if("undefined" IN_LIST GRADCOMM_SANITIZE)
    # C callers may pass any int where the C API takes an enum; the library checks
    # such arguments by value (is_valid_dtype and friends). Reading an out-of-range
    # value through a C enum type is what UBSan's "enum" check flags, so it would
    # flag exactly the bad-input tests that prove the validation. Every internal
    # enum is an enum class with a fixed underlying type, which the check ignores.
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize=enum>
                        $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fno-sanitize=enum>)
  endif()
  message(STATUS "gradcomm: sanitizers: ${_gradcomm_san}")
endif()
