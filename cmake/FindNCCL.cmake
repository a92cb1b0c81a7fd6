# FindNCCL
# --------
# Finds NCCL's header and shared library and defines the imported targets
# NCCL::headers (nccl.h only: libgradcomm.so loads NCCL at run time, with dlopen)
# and NCCL::nccl (the header and the library, for programs that call NCCL themselves).
#
# Looks, in order, at:
#   NCCL_ROOT / NCCL_HOME (CMake or environment variables), NCCL_INCLUDE_DIR / NCCL_LIBRARY,
#   the CUDA toolkit's folders,
#   the nvidia/nccl folder of a Python "nvidia-nccl-cu*" package (the GPU machine has NCCL only there),
#   the system's default paths.
#
# Result variables: NCCL_FOUND, NCCL_INCLUDE_DIRS, NCCL_LIBRARIES, NCCL_LIBRARY_DIR, NCCL_VERSION,
# NCCL_VERSION_CODE (as NCCL_VERSION_CODE in nccl.h: major*10000 + minor*100 + patch).

set(_nccl_hints)
foreach(_var NCCL_ROOT NCCL_HOME)
  if(DEFINED ${_var})
    list(APPEND _nccl_hints "${${_var}}")
  endif()
  if(DEFINED ENV{${_var}})
    list(APPEND _nccl_hints "$ENV{${_var}}")
  endif()
endforeach()
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints "${CUDAToolkit_LIBRARY_ROOT}")
endif()
if(CUDAToolkit_INCLUDE_DIRS)
  foreach(_inc ${CUDAToolkit_INCLUDE_DIRS})
    get_filename_component(_root "${_inc}" DIRECTORY)
    list(APPEND _nccl_hints "${_root}")
  endforeach()
endif()

# The Python package: nvidia/nccl/{include,lib}. nvidia is a namespace package, so ask
# importlib for its search location rather than __file__.
if(NOT NCCL_NO_PYTHON_PACKAGE)
  find_program(_nccl_python NAMES python3 python)
  if(_nccl_python)
    execute_process(
      COMMAND "${_nccl_python}" -c
        "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s else '')"
      OUTPUT_VARIABLE _nccl_py_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _nccl_py_rc)
    if(_nccl_py_rc EQUAL 0 AND _nccl_py_dir)
      list(APPEND _nccl_hints "${_nccl_py_dir}")
    endif()
  endif()
endif()

find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
# The Python package ships only libnccl.so.2 (no unversioned link): name it too.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_defs REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _m "${_nccl_defs}")
    set(NCCL_VERSION_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${NCCL_VERSION_MAJOR}.${NCCL_VERSION_MINOR}.${NCCL_VERSION_PATCH}")
  math(EXPR NCCL_VERSION_CODE "${NCCL_VERSION_MAJOR} * 10000 + ${NCCL_VERSION_MINOR} * 100 + ${NCCL_VERSION_PATCH}")
endif()

string(REPLACE ";" ", " _nccl_searched "${_nccl_hints}")
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION
  REASON_FAILURE_MESSAGE
    "gradcomm needs NCCL (header nccl.h and libnccl.so). Set NCCL_ROOT (or NCCL_HOME) to a folder with include/ and lib/, install the 'nvidia-nccl-cu13' Python package, or install NCCL into the CUDA toolkit. Searched: ${_nccl_searched}")

if(NCCL_FOUND)
  set(NCCL_INCLUDE_DIRS "${NCCL_INCLUDE_DIR}")
  set(NCCL_LIBRARIES "${NCCL_LIBRARY}")
  get_filename_component(NCCL_LIBRARY_DIR "${NCCL_LIBRARY}" DIRECTORY)
  if(NOT TARGET NCCL::headers)
    add_library(NCCL::headers INTERFACE IMPORTED)
    set_target_properties(NCCL::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
  if(NOT TARGET NCCL::nccl)
    add_library(NCCL::nccl SHARED IMPORTED)
    set_target_properties(NCCL::nccl PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
  message(STATUS "gradcomm: NCCL ${NCCL_VERSION} at ${NCCL_LIBRARY}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
