/* Builds without CUDA: the driver API types gradcomm names (its driver calls go
 * through cudaGetDriverEntryPointByVersion, which finds none here). */
#ifndef GRADCOMM_CUDA_ABSENT_DRIVER_H
#define GRADCOMM_CUDA_ABSENT_DRIVER_H

#include <stdint.h>

typedef enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 } CUresult;
typedef int CUdevice;
typedef uintptr_t CUdeviceptr;
typedef enum CUmemorytype_enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2 } CUmemorytype;
typedef enum CUpointer_attribute_enum {
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
} CUpointer_attribute;

#endif /* GRADCOMM_CUDA_ABSENT_DRIVER_H */
