# The communicator's own logic, with fake transports (comm/communicator.cpp,
# comm/group.cpp), the transport table, and NCCL's version gating.
gradcomm_add_test(gradcomm_comm_core_tests
  SOURCES group_launch_test.cpp transports_test.cpp nccl_version_test.cpp
  LIBS gradcomm_comm
  LABELS comm)
