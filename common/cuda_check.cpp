#include "common/cuda_check.hpp"

#include "common/log.hpp"

namespace gradcomm {

bool is_sticky_cuda_error(cudaError_t error) noexcept {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

namespace {
std::string describe(cudaError_t error, const char* expr, const char* file, int line) {
  std::string msg = cat(called_function(expr), " failed: ", cudaGetErrorName(error), " (",
                        cudaGetErrorString(error), ") at ", file, ":", line);
  if (is_sticky_cuda_error(error))
    msg += "; this error is sticky: the CUDA context is unusable and the process must be restarted";
  return msg;
}
}  // namespace

void throw_cuda_error(cudaError_t error, const char* expr, const char* file, int line) {
  // Clear the per-thread error so the next unrelated CUDA call does not report it.
  (void)cudaGetLastError();
  std::string msg = describe(error, expr, file, line);
  GCOMM_INFO(CALL, msg);
  throw Error(error == cudaErrorMemoryAllocation ? gcommOutOfMemory : gcommCudaError, msg);
}

void warn_cuda_error(cudaError_t error, const char* expr, const char* file, int line) noexcept {
  (void)cudaGetLastError();
  try {
    GCOMM_WARN(describe(error, expr, file, line));
  } catch (...) {
  }
}

}  // namespace gradcomm
