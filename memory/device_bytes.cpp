#include "memory/device_bytes.hpp"

#include <cstring>

#include "common/cuda_check.hpp"
#include "common/device.hpp"

namespace gradcomm::memory {

void zero_bytes(void* ptr, size_t bytes, const gcommDevice_t& device, gcommStream_t stream) {
  if (bytes == 0) return;
  if (device.kind == gcommDeviceHost) {
    std::memset(ptr, 0, bytes);
    return;
  }
  DeviceGuard guard(device);
  GCOMM_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, static_cast<cudaStream_t>(stream)));
}

void copy_bytes(void* dst, const void* src, size_t bytes, const gcommDevice_t& device, gcommStream_t stream,
                cudaMemcpyKind kind) {
  if (bytes == 0) return;
  if (device.kind == gcommDeviceHost) {
    std::memcpy(dst, src, bytes);
    return;
  }
  DeviceGuard guard(device);
  GCOMM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, static_cast<cudaStream_t>(stream)));
}

}  // namespace gradcomm::memory
