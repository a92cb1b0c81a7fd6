// Checked CUDA calls. A failure clears CUDA's (non-sticky) error state, logs one
// line at INFO with the call site (so the INFO log reads as a backtrace) and throws
// Error with gcommCudaError (gcommOutOfMemory for allocation failures).
#pragma once

#include <cuda_runtime_api.h>

#include "common/error.hpp"

namespace gradcomm {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line);

// True for errors that leave the CUDA context unusable until the process exits.
bool is_sticky_cuda_error(cudaError_t error) noexcept;

// For destructors and cleanup paths that must not throw: logs a WARN instead.
void warn_cuda_error(cudaError_t error, const char* expr, const char* file, int line) noexcept;

}  // namespace gradcomm

#define GCOMM_CUDA_CHECK(expr)                                                                          \
  do {                                                                                                  \
    cudaError_t gcomm_err_ = (expr);                                                                    \
    if (gcomm_err_ != cudaSuccess) ::gradcomm::throw_cuda_error(gcomm_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define GCOMM_CUDA_WARN(expr)                                                                          \
  do {                                                                                                 \
    cudaError_t gcomm_err_ = (expr);                                                                   \
    if (gcomm_err_ != cudaSuccess) ::gradcomm::warn_cuda_error(gcomm_err_, #expr, __FILE__, __LINE__); \
  } while (0)
