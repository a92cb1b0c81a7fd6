// CUDA upstreams: device memory (cudaMalloc) and page-locked host memory
// (cudaHostAlloc). Every call holds a DeviceGuard for the upstream's device, so
// the memory and the context it lives in belong to that device and the caller's
// current device is restored.
#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "memory/upstream/upstream.hpp"

namespace gradcomm {
namespace memory {
namespace {

class CudaUpstreamBase : public Upstream {
 public:
  explicit CudaUpstreamBase(int ordinal) : ordinal_(ordinal) {}
  gcommDevice_t device() const noexcept override { return gcommCudaDevice(ordinal_); }
  std::optional<MemoryInfo> memory_info() const noexcept override {
    try {
      DeviceGuard guard(ordinal_);
      MemoryInfo info;
      if (cudaMemGetInfo(&info.free_bytes, &info.total_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return std::nullopt;
      }
      return info;
    } catch (...) {
      return std::nullopt;
    }
  }

 protected:
  int ordinal_;
};

class CudaDeviceUpstream final : public CudaUpstreamBase {
 public:
  using CudaUpstreamBase::CudaUpstreamBase;
  void* allocate(size_t bytes) override {
    // cudaMalloc(0) succeeds with a null pointer: the contract (upstream.hpp) refuses 0.
    require(bytes > 0, "device upstream: cannot allocate 0 bytes");
    DeviceGuard guard(ordinal_);
    void* ptr = nullptr;
    // cudaErrorMemoryAllocation becomes gcommOutOfMemory (cuda_check.cpp).
    GCOMM_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    return ptr;
  }
  void deallocate(void* ptr, size_t) noexcept override {
    try {
      DeviceGuard guard(ordinal_);
      GCOMM_CUDA_WARN(cudaFree(ptr));
    } catch (...) {
      GCOMM_WARN("cudaFree of ", ptr, " on cuda:", ordinal_, " skipped: could not switch to the device");
    }
  }
  const char* kind_name() const noexcept override { return "device memory"; }
  // cudaFree synchronizes the device before it returns the memory.
  bool deallocate_waits_for_device() const noexcept override { return true; }
};

class CudaPinnedUpstream final : public CudaUpstreamBase {
 public:
  using CudaUpstreamBase::CudaUpstreamBase;
  void* allocate(size_t bytes) override {
    require(bytes > 0, "pinned upstream: cannot allocate 0 bytes");
    DeviceGuard guard(ordinal_);
    void* ptr = nullptr;
    GCOMM_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault));
    return ptr;
  }
  void deallocate(void* ptr, size_t) noexcept override {
    try {
      DeviceGuard guard(ordinal_);
      GCOMM_CUDA_WARN(cudaFreeHost(ptr));
    } catch (...) {
      GCOMM_WARN("cudaFreeHost of ", ptr, " skipped: could not switch to cuda:", ordinal_);
    }
  }
  const char* kind_name() const noexcept override { return "pinned host memory"; }
  // Pinned memory is host RAM: the device's free memory says nothing about it.
  std::optional<MemoryInfo> memory_info() const noexcept override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<Upstream> make_cuda_device_upstream(int ordinal) {
  return std::make_unique<CudaDeviceUpstream>(ordinal);
}
std::unique_ptr<Upstream> make_cuda_pinned_upstream(int ordinal) {
  return std::make_unique<CudaPinnedUpstream>(ordinal);
}

}  // namespace memory
}  // namespace gradcomm
