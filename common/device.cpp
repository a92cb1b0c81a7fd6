#include "common/device.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <mutex>

#include "common/cuda_check.hpp"
#include "common/log.hpp"

namespace gradcomm {

namespace {
struct GpuProbe {
  int count = 0;
  std::string reason;
};

const GpuProbe& probe() {
  static const GpuProbe result = [] {
    GpuProbe p;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      // "No driver" (cudaErrorInsufficientDriver), "no device" (cudaErrorNoDevice)
      // and friends all mean: no usable GPU here.
      (void)cudaGetLastError();
      p.reason = cat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
      GCOMM_INFO("no usable GPU: ", p.reason);
      return p;
    }
    p.count = n;
    if (n == 0) p.reason = "cudaGetDeviceCount reported 0 devices";
    return p;
  }();
  return result;
}

using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
using DeviceGet = CUresult (*)(CUdevice*, int);
}  // namespace

int cuda_device_count() noexcept {
  try {
    return probe().count;
  } catch (...) {
    return 0;
  }
}

std::string no_gpu_reason() { return probe().reason; }

std::string describe_device(const gcommDevice_t& device) {
  if (device.kind == gcommDeviceHost) return "host";
  if (device.kind == gcommDeviceCuda) return cat("cuda:", device.ordinal);
  return cat("<invalid device kind ", static_cast<int>(device.kind), ">");
}

gcommDevice_t validate_device(const gcommDevice_t& device, const char* what) {
  if (device.kind == gcommDeviceHost) return gcommHostDevice();
  require(device.kind == gcommDeviceCuda, what, ": unknown device kind ", static_cast<int>(device.kind),
          " (use gcommHostDevice() or gcommCudaDevice(ordinal))");
  int count = cuda_device_count();
  require(count > 0, what, ": ", describe_device(device), " was requested but no usable GPU is present (",
          no_gpu_reason(), "); use gcommHostDevice() on this machine");
  require(device.ordinal >= 0 && device.ordinal < count, what, ": ", describe_device(device),
          " is not a visible CUDA device (", count, " visible: 0..", count - 1,
          "; check CUDA_VISIBLE_DEVICES and LOCAL_RANK)");
  return device;
}

PointerInfo pointer_info(const void* ptr) noexcept {
  PointerInfo info;
  if (ptr == nullptr || !gpu_available()) return info;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return info;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice: info.kind = MemoryKind::kDevice; break;
    case cudaMemoryTypeManaged: info.kind = MemoryKind::kManaged; break;
    case cudaMemoryTypeHost: info.kind = MemoryKind::kPinnedHost; break;
    default: info.kind = MemoryKind::kHost; break;
  }
  info.device = info.kind == MemoryKind::kHost ? -1 : attr.device;
  return info;
}

const char* memory_kind_name(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::kHost: return "host memory";
    case MemoryKind::kPinnedHost: return "pinned host memory";
    case MemoryKind::kDevice: return "device memory";
    case MemoryKind::kManaged: return "managed memory";
  }
  return "?";
}

bool primary_context_active(int ordinal) noexcept {
  static PrimaryCtxGetState get_state = nullptr;
  static DeviceGet device_get = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaDriverEntryPointQueryResult q1{}, q2{};
    void* f1 = nullptr;
    void* f2 = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &f1, 12000, cudaEnableDefault, &q1) ==
            cudaSuccess &&
        q1 == cudaDriverEntryPointSuccess &&
        cudaGetDriverEntryPointByVersion("cuDeviceGet", &f2, 12000, cudaEnableDefault, &q2) == cudaSuccess &&
        q2 == cudaDriverEntryPointSuccess) {
      get_state = reinterpret_cast<PrimaryCtxGetState>(f1);
      device_get = reinterpret_cast<DeviceGet>(f2);
    } else {
      (void)cudaGetLastError();
    }
  });
  if (get_state == nullptr || device_get == nullptr) return false;
  CUdevice dev{};
  if (device_get(&dev, ordinal) != CUDA_SUCCESS) return false;
  unsigned int flags = 0;
  int active = 0;
  if (get_state(dev, &flags, &active) != CUDA_SUCCESS) return false;
  return active != 0;
}

DeviceGuard::DeviceGuard(int ordinal) {
  if (ordinal < 0) return;
  int current = -1;
  GCOMM_CUDA_CHECK(cudaGetDevice(&current));  // does not create a context
  if (current == ordinal) return;
  GCOMM_CUDA_CHECK(cudaSetDevice(ordinal));
  previous_ = current;
  switched_ = true;
}

DeviceGuard::~DeviceGuard() {
  if (!switched_) return;
  if (primary_context_active(previous_)) {
    GCOMM_CUDA_WARN(cudaSetDevice(previous_));
  } else {
    GCOMM_TRACE("not restoring current device ", previous_,
                ": it has no context yet, and restoring would create one");
  }
}

}  // namespace gradcomm
