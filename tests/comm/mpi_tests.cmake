# The MPI bootstrap under a real mpirun (only where the plugin was built; not in
# sanitizer builds, where Open MPI's own allocations at MPI_Init read as leaks).
if(TARGET gradcomm_mpi AND GRADCOMM_BUILD_TOOLS AND NOT GRADCOMM_SANITIZE)
  add_executable(gradcomm_mpi_init_test mpi/mpi_init_main.cpp)
  target_link_libraries(gradcomm_mpi_init_test PRIVATE gradcomm::gradcomm MPI::MPI_C)
  target_compile_definitions(gradcomm_mpi_init_test PRIVATE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
  gradcomm_warnings(gradcomm_mpi_init_test)
  add_test(NAME comm.mpi_bootstrap_under_mpirun
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_mpi_bootstrap.sh $<TARGET_FILE:gradcomm_mpi_init_test>
      $<TARGET_FILE:gradcomm-perf>)
  set_tests_properties(comm.mpi_bootstrap_under_mpirun PROPERTIES LABELS "comm;tools" TIMEOUT 300)
  # Issue 18: the MPI transport against the local transport, bit for bit.
  add_executable(gradcomm_mpi_transport_test mpi/mpi_transport_main.cpp)
  target_include_directories(gradcomm_mpi_transport_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(gradcomm_mpi_transport_test PRIVATE gradcomm::gradcomm MPI::MPI_C)
  target_compile_definitions(gradcomm_mpi_transport_test PRIVATE OMPI_SKIP_MPICXX MPICH_SKIP_MPICXX)
  gradcomm_warnings(gradcomm_mpi_transport_test)
  add_test(NAME comm.mpi_transport_under_mpirun
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_mpi_transport.sh $<TARGET_FILE:gradcomm_mpi_transport_test>)
  set_tests_properties(comm.mpi_transport_under_mpirun PROPERTIES LABELS "comm" TIMEOUT 600)
endif()
