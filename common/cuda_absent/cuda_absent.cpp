// The CUDA runtime of a build without CUDA (cuda_runtime_api.h here): no device,
// ever. Calls that need one return cudaErrorNoDevice, as CUDA's runtime does on a
// machine without a GPU; the error is not sticky, so cudaGetLastError returns
// cudaSuccess. Nothing else is emulated (not even host-to-host copies or pinned
// host memory, which the real runtime also refuses without a driver): the
// library's behaviour is exactly its behaviour on a machine without a GPU.
#include "cuda_runtime_api.h"

namespace {
constexpr cudaError_t kNoDevice = cudaErrorNoDevice;
}

extern "C" {

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorNoDevice:
      return "gradcomm was built without CUDA (GRADCOMM_CUDA=OFF): no CUDA device";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    default:
      return "gradcomm was built without CUDA (GRADCOMM_CUDA=OFF)";
  }
}

cudaError_t cudaGetLastError(void) {
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  return *version = 0, cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  return *version = 0, cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* count) {
  return *count = 0, kNoDevice;
}
cudaError_t cudaGetDevice(int*) {
  return kNoDevice;
}
cudaError_t cudaSetDevice(int) {
  return kNoDevice;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp*, int) {
  return kNoDevice;
}
cudaError_t cudaDeviceGetPCIBusId(char*, int, int) {
  return kNoDevice;
}
cudaError_t cudaDeviceSynchronize(void) {
  return kNoDevice;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char*, void** func, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  *func = nullptr;
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return kNoDevice;
}
cudaError_t cudaMalloc(void**, size_t) {
  return kNoDevice;
}
cudaError_t cudaFree(void* ptr) {
  return ptr == nullptr ? cudaSuccess : kNoDevice;
}
cudaError_t cudaMallocAsync(void**, size_t, cudaStream_t) {
  return kNoDevice;
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) {
  return ptr == nullptr ? cudaSuccess : kNoDevice;
}
cudaError_t cudaMallocHost(void**, size_t) {
  return kNoDevice;
}
cudaError_t cudaHostAlloc(void**, size_t, unsigned int) {
  return kNoDevice;
}
cudaError_t cudaFreeHost(void* ptr) {
  return ptr == nullptr ? cudaSuccess : kNoDevice;
}
cudaError_t cudaMemGetInfo(size_t*, size_t*) {
  return kNoDevice;
}
cudaError_t cudaMemcpy(void*, const void*, size_t, enum cudaMemcpyKind) {
  return kNoDevice;
}
cudaError_t cudaMemcpyAsync(void*, const void*, size_t, enum cudaMemcpyKind, cudaStream_t) {
  return kNoDevice;
}
cudaError_t cudaMemset(void*, int, size_t) {
  return kNoDevice;
}
cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t) {
  return kNoDevice;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes*, const void*) {
  return kNoDevice;
}
cudaError_t cudaStreamCreate(cudaStream_t*) {
  return kNoDevice;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t*, unsigned int) {
  return kNoDevice;
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
  return kNoDevice;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return kNoDevice;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned int) {
  return kNoDevice;
}
cudaError_t cudaEventCreate(cudaEvent_t*) {
  return kNoDevice;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t*, unsigned int) {
  return kNoDevice;
}
cudaError_t cudaEventDestroy(cudaEvent_t) {
  return kNoDevice;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) {
  return kNoDevice;
}
cudaError_t cudaEventQuery(cudaEvent_t) {
  return kNoDevice;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return kNoDevice;
}
cudaError_t cudaEventElapsedTime(float*, cudaEvent_t, cudaEvent_t) {
  return kNoDevice;
}

}  // extern "C"
