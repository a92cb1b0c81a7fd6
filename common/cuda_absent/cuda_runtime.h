/* Builds without CUDA: the runtime API (cuda_runtime_api.h says why), and, as in
 * CUDA's cuda_runtime.h, the C++ overloads that take a typed pointer. */
#ifndef GRADCOMM_CUDA_ABSENT_RUNTIME_H
#define GRADCOMM_CUDA_ABSENT_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
template <class T>
static inline cudaError_t cudaMalloc(T** ptr, size_t size) {
  return ::cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
template <class T>
static inline cudaError_t cudaMallocHost(T** ptr, size_t size) {
  return ::cudaMallocHost(reinterpret_cast<void**>(ptr), size);
}
template <class T>
static inline cudaError_t cudaHostAlloc(T** ptr, size_t size, unsigned int flags) {
  return ::cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}
template <class T>
static inline cudaError_t cudaMallocAsync(T** ptr, size_t size, cudaStream_t stream) {
  return ::cudaMallocAsync(reinterpret_cast<void**>(ptr), size, stream);
}
#endif

#endif
