// The upstream contract (memory/upstream/upstream.hpp), one suite over every
// upstream, as RMM runs one suite over every memory resource: host memory, CUDA
// device memory, CUDA pinned host memory (both skip without a GPU), and the test
// doubles the floors above run on (virtual memory, and the fault injector over
// it with no fault set). A new upstream adds one line to kUpstreams.
//   - allocate(n) gives n bytes or more, 256-byte aligned, apart from every other
//     live allocation; deallocate takes them back; allocate(0) is refused;
//   - an impossible size is gcommOutOfMemory (the cache flushes and retries on it);
//   - every call leaves the caller's current CUDA device as it was;
//   - the memory is where the upstream says (pointer_info), its device and name
//     given, and memory_info (where known) no more free than total.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/device.hpp"
#include "common/error.hpp"
#include "memory/testing/test_upstreams.hpp"
#include "memory/upstream/upstream.hpp"
#include "support/gpu.hpp"

namespace gradcomm::memory {
namespace {

struct UpstreamUnderTest {
  const char* name;
  bool needs_gpu;
  MemoryKind memory;  // where its bytes are (pointer_info), for the real ones
  bool real;          // real memory: written to and checked with pointer_info
  std::function<std::unique_ptr<Upstream>()> make;
};

// The fault injector forwards to an inner upstream that must outlive it.
struct InjectorOverVirtual final : Upstream {
  VirtualUpstream inner;
  FaultInjectingUpstream outer{inner};
  void* allocate(size_t bytes) override { return outer.allocate(bytes); }
  void deallocate(void* p, size_t bytes) noexcept override { outer.deallocate(p, bytes); }
  gcommDevice_t device() const noexcept override { return outer.device(); }
  const char* kind_name() const noexcept override { return outer.kind_name(); }
  std::optional<MemoryInfo> memory_info() const noexcept override { return outer.memory_info(); }
};

const UpstreamUnderTest kUpstreams[] = {
    {"host", false, MemoryKind::kHost, true, [] { return make_host_upstream(); }},
    {"cuda_device", true, MemoryKind::kDevice, true, [] { return make_cuda_device_upstream(0); }},
    {"cuda_pinned", true, MemoryKind::kPinnedHost, true, [] { return make_cuda_pinned_upstream(0); }},
    {"virtual", false, MemoryKind::kHost, false, [] { return std::make_unique<VirtualUpstream>(); }},
    {"fault_injector", false, MemoryKind::kHost, false,
     [] { return std::make_unique<InjectorOverVirtual>(); }},
};

void PrintTo(const UpstreamUnderTest* u, std::ostream* os) {
  *os << u->name;
}

class UpstreamContract : public ::testing::TestWithParam<const UpstreamUnderTest*> {
 protected:
  void SetUp() override {
    if (GetParam()->needs_gpu) GCOMM_SKIP_WITHOUT_GPU();
    up_ = GetParam()->make();
  }
  std::unique_ptr<Upstream> up_;
};

TEST_P(UpstreamContract, GivesAlignedSeparateBytesAndTakesThemBack) {
  std::vector<std::pair<char*, size_t>> live;
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{4097}, size_t{3} << 20}) {
    auto* p = static_cast<char*>(up_->allocate(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << n;
    for (const auto& [q, m] : live) EXPECT_TRUE(p + n <= q || q + m <= p) << "overlaps a live allocation";
    live.emplace_back(p, n);
  }
  if (GetParam()->real) {
    for (const auto& [p, n] : live) {
      EXPECT_EQ(pointer_info(p).kind, GetParam()->memory) << GetParam()->name;
      if (GetParam()->memory != MemoryKind::kDevice) std::memset(p, 0xAB, n);  // host-writable
    }
  }
  for (const auto& [p, n] : live) up_->deallocate(p, n);
}

TEST_P(UpstreamContract, ZeroBytesIsRefusedAndAnImpossibleSizeIsOutOfMemory) {
  EXPECT_THROW(up_->allocate(0), Error);
  try {
    (void)up_->allocate(size_t{1} << 62);
    FAIL() << "4 EiB were given";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommOutOfMemory) << e.message();
  }
}

TEST_P(UpstreamContract, SaysWhatItIsAndLeavesTheCallersDevice) {
  EXPECT_NE(std::string(up_->kind_name()), "");
  const gcommDevice_t d = up_->device();
  EXPECT_TRUE(d.kind == gcommDeviceHost || (d.kind == gcommDeviceCuda && d.ordinal >= 0));
  if (const std::optional<MemoryInfo> info = up_->memory_info()) {
    EXPECT_LE(info->free_bytes, info->total_bytes);
  }
  if (!gpu_available()) return;
  int before = -1, after = -1;
  ASSERT_EQ(cudaGetDevice(&before), cudaSuccess);
  void* p = up_->allocate(1 << 16);
  up_->deallocate(p, 1 << 16);
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, before);
}

std::vector<const UpstreamUnderTest*> upstreams() {
  std::vector<const UpstreamUnderTest*> all;
  for (const UpstreamUnderTest& u : kUpstreams) all.push_back(&u);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Every, UpstreamContract, ::testing::ValuesIn(upstreams()),
                         [](const ::testing::TestParamInfo<const UpstreamUnderTest*>& u) {
                           return std::string(u.param->name);
                         });

}  // namespace
}  // namespace gradcomm::memory
