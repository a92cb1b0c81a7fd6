# The communicator's own logic, with fake transports (comm/communicator.cpp, comm/group.cpp).
gradcomm_add_test(gradcomm_comm_core_tests
  SOURCES group_launch_test.cpp
  LIBS gradcomm_comm
  LABELS comm)
