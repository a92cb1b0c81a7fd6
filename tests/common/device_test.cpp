#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <string>

#include "common/api_guard.hpp"
#include "common/device.hpp"
#include "support/gpu.hpp"

namespace gradcomm {
namespace {

TEST(Device, CountingDevicesNeverFails) {
  int n = cuda_device_count();
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(no_gpu_reason().empty());
  }
  EXPECT_EQ(cuda_device_count(), n) << "the probe is cached";
}

TEST(Device, HostIsAlwaysValid) {
  gcommDevice_t host = gcommHostDevice();
  host.ordinal = 17;  // ignored for the host, normalised to -1
  gcommDevice_t d = validate_device(host);
  EXPECT_EQ(d.kind, gcommDeviceHost);
  EXPECT_EQ(d.ordinal, -1);
  EXPECT_EQ(describe_device(d), "host");
}

TEST(Device, InvalidDescriptorsAreRefusedWithAReason) {
  gcommDevice_t bad;
  bad.kind = static_cast<gcommDeviceKind_t>(9);
  bad.ordinal = 0;
  EXPECT_EQ(api_call("t", [&] { validate_device(bad); }), gcommInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("unknown device kind 9"), std::string::npos);

  int count = cuda_device_count();
  EXPECT_EQ(api_call("t", [&] { validate_device(gcommCudaDevice(count)); }), gcommInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("cuda:" + std::to_string(count)), std::string::npos);
  EXPECT_EQ(api_call("t", [&] { validate_device(gcommCudaDevice(-1)); }), gcommInvalidArgument);
}

TEST(Device, HostGuardDoesNothing) {
  DeviceGuard guard(gcommHostDevice());
  SUCCEED();
}

TEST(DeviceGpu, GuardSwitchesAndRestores) {
  GCOMM_SKIP_WITHOUT_GPU();
  int count = cuda_device_count();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    DeviceGuard guard(count - 1);
    int current = -1;
    ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
    EXPECT_EQ(current, count - 1);
  }
  int after = -1;
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, 0);
  EXPECT_TRUE(primary_context_active(0));
}

}  // namespace
}  // namespace gradcomm

namespace gradcomm {
namespace {
TEST(Device, HostPointersAreHostMemory) {
  int x = 0;
  PointerInfo info = pointer_info(&x);
  EXPECT_EQ(info.kind, MemoryKind::kHost);
  EXPECT_EQ(info.device, -1);
  EXPECT_EQ(pointer_info(nullptr).kind, MemoryKind::kHost);
  PointerRange r = pointer_range(&x);
  EXPECT_EQ(r.info.kind, MemoryKind::kHost);
  EXPECT_FALSE(r.contains(reinterpret_cast<uintptr_t>(&x)));  // no range for pageable memory
}

TEST(DeviceGpu, DevicePointersAreDeviceMemory) {
  GCOMM_SKIP_WITHOUT_GPU();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  PointerInfo info = pointer_info(p);
  EXPECT_EQ(info.kind, MemoryKind::kDevice);
  EXPECT_EQ(info.device, 0);
  cudaFree(p);
}

TEST(DeviceGpu, PointerRangeCoversTheWholeAllocation) {
  GCOMM_SKIP_WITHOUT_GPU();
  char* p = nullptr;
  char* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4096), cudaSuccess);
  PointerRange r = pointer_range(p + 12345);
  EXPECT_EQ(r.info.kind, MemoryKind::kDevice);
  EXPECT_EQ(r.info.device, 0);
  EXPECT_TRUE(r.contains(reinterpret_cast<uintptr_t>(p)));
  EXPECT_TRUE(r.contains(reinterpret_cast<uintptr_t>(p) + (1 << 20) - 1));
  EXPECT_FALSE(r.contains(reinterpret_cast<uintptr_t>(p) + (1 << 20)));
  PointerRange h = pointer_range(pinned + 8);
  EXPECT_EQ(h.info.kind, MemoryKind::kPinnedHost);
  EXPECT_EQ(h.info.kind, pointer_info(pinned).kind);
  cudaFreeHost(pinned);
  cudaFree(p);
}
}  // namespace
}  // namespace gradcomm
