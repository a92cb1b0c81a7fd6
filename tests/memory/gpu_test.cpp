// GPU cases: the CUDA upstreams and events, and the device contract (the
// caller's current device is unchanged after every call, and no other device
// is touched). They skip without a GPU.
#include "support/gpu.hpp"

#include <cuda_runtime_api.h>

#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"
#include "gradcomm/gradcomm.h"
#include "memory/caching_allocator.hpp"

namespace gradcomm {
namespace memory {
namespace {

int current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

TEST(MemoryGpu, DeviceUpstreamGivesDeviceMemoryOfItsDevice) {
  GCOMM_SKIP_WITHOUT_GPU();
  const int last = cuda_device_count() - 1;
  auto up = make_cuda_device_upstream(last);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // make device 0's context exist
  void* p = up->allocate(1 << 20);
  EXPECT_EQ(current_device(), 0);
  PointerInfo info = pointer_info(p);
  EXPECT_EQ(info.kind, MemoryKind::kDevice);
  EXPECT_EQ(info.device, last);
  EXPECT_TRUE(up->memory_info().has_value());
  up->deallocate(p, 1 << 20);
  EXPECT_EQ(current_device(), 0);
}

TEST(MemoryGpu, CudaEventsFollowTheStream) {
  GCOMM_SKIP_WITHOUT_GPU();
  auto ev = make_cuda_event_source(0);
  DeviceGuard guard(0);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Event e = ev->record(reinterpret_cast<gcommStream_t>(s));
  ev->synchronize(e);
  EXPECT_TRUE(ev->query(e));
  ev->release(e);
  Event again = ev->record(reinterpret_cast<gcommStream_t>(s));
  EXPECT_EQ(again, e) << "released events are reused";
  ev->release(again);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(MemoryGpu, EveryCallLeavesTheCallersDeviceCurrent) {
  GCOMM_SKIP_WITHOUT_GPU();
  const int count = cuda_device_count();
  const int target = count - 1;
  const int caller = 0;
  ASSERT_EQ(cudaSetDevice(caller), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  for (gcommMemoryKind_t kind : {gcommMemoryDevice, gcommMemoryPinnedHost}) {
    auto a = make_caching_allocator(gcommCudaDevice(target), kind, AllocatorOptions{});
    EXPECT_EQ(current_device(), caller);
    void* p = a->allocate(3 << 20, nullptr);
    EXPECT_EQ(current_device(), caller);
    a->record_stream(p, cudaStreamPerThread);
    a->deallocate(p, nullptr);
    EXPECT_EQ(current_device(), caller);
    void* q = a->allocate(100, nullptr);
    a->deallocate(q, nullptr);
    (void)a->stats();
    (void)a->summary();
    a->release_cached();
    EXPECT_EQ(current_device(), caller);
    a.reset();
    EXPECT_EQ(current_device(), caller);
  }
}

TEST(MemoryGpu, DeviceAllocatorOutOfMemoryReportsFreeBytes) {
  GCOMM_SKIP_WITHOUT_GPU();
  auto a = make_caching_allocator(gcommCudaDevice(0), gcommMemoryDevice, AllocatorOptions{});
  try {
    a->allocate(size_t{1} << 50, nullptr);  // 1 PiB
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommOutOfMemory);
    EXPECT_NE(e.message().find("the device has"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("cuda:0"), std::string::npos) << e.message();
  }
  EXPECT_EQ(a->stats().reserved_bytes.all().current, 0u);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
