#include "common/device.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>

#include "common/cuda_check.hpp"
#include "common/log.hpp"

namespace gradcomm {

namespace {
struct GpuProbe {
  int count = 0;
  std::string reason;
};

// Said plainly: "CUDA driver version is insufficient" on a machine with no driver
// at all reads like a fault to fix, when it only means "no GPU here".
std::string plain_no_gpu_reason(cudaError_t err) {
#ifdef GRADCOMM_CUDA_ABSENT
  (void)err;  // the stand-in runtime's "no device" is no driver's answer
  return "gradcomm was built without CUDA (GRADCOMM_CUDA=OFF)";
#else
  const std::string code = cudaGetErrorName(err);
  int driver = 0;
  if (err == cudaErrorInsufficientDriver) {
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
      (void)cudaGetLastError();
      return cat("no NVIDIA driver is installed (", code, ")");
    }
    int runtime = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    return cat("the NVIDIA driver supports CUDA ", driver / 1000, ".", (driver % 1000) / 10,
               ", older than this build's CUDA runtime ", runtime / 1000, ".", (runtime % 1000) / 10, " (",
               code, "); update the driver");
  }
  if (err == cudaErrorNoDevice)
    return cat("the driver sees no CUDA device (", code, "; check CUDA_VISIBLE_DEVICES)");
  return cat(code, ": ", cudaGetErrorString(err));
#endif
}

const GpuProbe& probe() {
  static const GpuProbe result = [] {
    GpuProbe p;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      // "No driver" (cudaErrorInsufficientDriver), "no device" (cudaErrorNoDevice)
      // and friends all mean: no usable GPU here.
      (void)cudaGetLastError();
      p.reason = plain_no_gpu_reason(err);
      GCOMM_INFO(INIT, "no usable GPU: ", p.reason);
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
using PointerGetAttributes = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);

}  // namespace

void* driver_entry(const char* name) noexcept {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return f;
}

int cuda_device_count() noexcept {
  try {
    return probe().count;
  } catch (...) {
    return 0;
  }
}

std::string no_gpu_reason() {
  return probe().reason;
}

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

namespace {
std::atomic<uint64_t> g_pointer_lookups{0};

// pointer_info without the count (pointer_range's fallback).
PointerInfo query_pointer_info(const void* ptr) noexcept {
  PointerInfo info;
  if (ptr == nullptr || !gpu_available()) return info;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return info;
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      info.kind = MemoryKind::kDevice;
      break;
    case cudaMemoryTypeManaged:
      info.kind = MemoryKind::kManaged;
      break;
    case cudaMemoryTypeHost:
      info.kind = MemoryKind::kPinnedHost;
      break;
    default:
      info.kind = MemoryKind::kHost;
      break;
  }
  info.device = info.kind == MemoryKind::kHost ? -1 : attr.device;
  return info;
}
}  // namespace

uint64_t pointer_lookups() noexcept {
  return g_pointer_lookups.load(std::memory_order_relaxed);
}

PointerInfo pointer_info(const void* ptr) noexcept {
  g_pointer_lookups.fetch_add(1, std::memory_order_relaxed);
  return query_pointer_info(ptr);
}

PointerRange pointer_range(const void* ptr) noexcept {
  g_pointer_lookups.fetch_add(1, std::memory_order_relaxed);
  PointerRange r;
  if (ptr == nullptr || !gpu_available()) return r;
  static const auto get = reinterpret_cast<PointerGetAttributes>(driver_entry("cuPointerGetAttributes"));
  unsigned int type = 0;
  unsigned int managed = 0;
  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&type, &managed, &ordinal, &start, &size};
  if (get == nullptr || get(5, attrs, data, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS ||
      type == 0) {
    // Unknown to the driver (pageable host memory) or no driver entry: the runtime's answer, no range.
    r.info = query_pointer_info(ptr);
    return r;
  }
  if (managed != 0) {
    r.info.kind = MemoryKind::kManaged;
  } else if (type == CU_MEMORYTYPE_DEVICE) {
    r.info.kind = MemoryKind::kDevice;
  } else if (type == CU_MEMORYTYPE_HOST) {
    r.info.kind = MemoryKind::kPinnedHost;
  } else {
    r.info = query_pointer_info(ptr);
    return r;
  }
  r.info.device = ordinal;
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (size > 0 && start <= p && p - start < size) {
    r.begin = static_cast<uintptr_t>(start);
    r.end = r.begin + size;
  }
  return r;
}

bool usable_by(const PointerInfo& info, const gcommDevice_t& device) noexcept {
  if (device.kind == gcommDeviceCuda)
    return (info.kind == MemoryKind::kDevice && info.device == device.ordinal) ||
           info.kind == MemoryKind::kManaged;
  return info.kind != MemoryKind::kDevice;
}

void require_usable(const PointerInfo& info, const gcommDevice_t& device, const char* what, long long index,
                    const char* user) {
  if (usable_by(info, device)) return;
  std::string name = index < 0 ? std::string(what) : cat(what, "[", index, "]");
  if (device.kind == gcommDeviceCuda)
    fail(gcommInvalidArgument, name, " is ", memory_kind_name(info.kind),
         info.kind == MemoryKind::kDevice ? cat(" of cuda:", info.device) : std::string(), " but ", user, " ",
         describe_device(device), ", which needs device memory of that GPU");
  fail(gcommInvalidArgument, name, " is device memory of cuda:", info.device, " but ", user,
       " the host; pass that CUDA device (gcommCudaDevice) instead");
}

const char* memory_kind_name(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::kHost:
      return "host memory";
    case MemoryKind::kPinnedHost:
      return "pinned host memory";
    case MemoryKind::kDevice:
      return "device memory";
    case MemoryKind::kManaged:
      return "managed memory";
  }
  return "?";
}

bool primary_context_active(int ordinal) noexcept {
  static const auto get_state =
      reinterpret_cast<PrimaryCtxGetState>(driver_entry("cuDevicePrimaryCtxGetState"));
  static const auto device_get = reinterpret_cast<DeviceGet>(driver_entry("cuDeviceGet"));
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
    GCOMM_TRACE(CALL, "not restoring current device ", previous_,
                ": it has no context yet, and restoring would create one");
  }
}

}  // namespace gradcomm
