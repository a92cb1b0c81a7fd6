if(GRADCOMM_WITH_CUDA)
  list(APPEND GRADCOMM_COMM_SOURCES
    cuda_ipc/cuda_ipc_choice.cpp
    cuda_ipc/ipc_buffers.cpp
    cuda_ipc/peer_events.cpp
    cuda_ipc/cuda_ipc_transport.cpp
    cuda_ipc/cuda_ipc_init.cpp)
else()
  list(APPEND GRADCOMM_COMM_SOURCES cuda_ipc/cuda_ipc_choice.cpp cuda_ipc/cuda_ipc_absent.cpp)
endif()
