// A reducer step asks the driver nothing about where its pointers live: the
// gradients were checked at registration and every other buffer is the
// reducer's own. On a GPU each such query costs ~0.5 us, and before this the
// step asked about two per gradient (pack and unpack) plus a few per bucket: on
// the H100, ResNet-50's 161 gradients spent ~160 us of host time in a step.
// Calls on caller-owned pointers keep asking (checked here too, so the counter
// is known to move).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/local/local_transport.hpp"
#include "common/device.hpp"
#include "kernels/grad_scaler.hpp"
#include "kernels/ops.hpp"
#include "reducer/reducer.hpp"
#include "reducer/reducer_rig.hpp"
#include "support/gpu.hpp"

namespace gradcomm::reducer {

using namespace gradcomm::comm;  // the floor below: communicators, transports
namespace {

// Gradients of a few sizes, zeroed, in host memory or in one cudaMalloc each.
struct Grads {
  std::vector<test::GradMem> mem;
  std::vector<gcommTensor_t> tensors;
  explicit Grads(bool gpu) {
    for (size_t n : {300, 5, 1000, 77, 4096}) {
      mem.emplace_back(gcommFloat32, n, gpu);
      if (gpu) {
        EXPECT_EQ(cudaMemset(mem.back().data, 0, n * sizeof(float)), cudaSuccess);
      } else {
        std::memset(mem.back().data, 0, n * sizeof(float));
      }
      tensors.push_back(mem.back().tensor());
    }
  }
};

struct Variant {
  const char* name;
  bool views;
  int wire;
  bool scaler;
  bool powersgd;
};

class ReducerDriverQueries : public ::testing::TestWithParam<bool> {
 protected:
  bool gpu() const { return GetParam(); }
  gcommDevice_t device() const { return gpu() ? gcommCudaDevice(0) : gcommHostDevice(); }
  void SetUp() override {
    if (gpu()) GCOMM_SKIP_WITHOUT_GPU();
  }

  // Lookups asked by two synced steps (the first rebuilds the plan) and a no-sync one.
  uint64_t lookups_in_steps(const Variant& v) {
    auto transports = make_local_transports(1, device(), 30.0);
    Communicator comm(std::move(transports[0]), 30.0);
    Grads g(gpu());
    std::vector<gcommTensor_t> tensors = g.tensors;
    if (v.views)
      for (auto& t : tensors) t.data = nullptr;
    ReducerOptions o;
    o.bucket_cap_bytes = 4096;
    o.first_bucket_bytes = 1024;
    o.grad_as_bucket_view = v.views;
    o.wire_dtype = v.wire;
    gcommGradScalerConfig_t sc = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
    std::unique_ptr<kernels::GradScaler> scaler;
    if (v.scaler) scaler = std::make_unique<kernels::GradScaler>(device(), sc);
    Reducer r(comm, tensors.data(), tensors.size(), o, scaler.get());
    if (v.powersgd) {
      const size_t rows[] = {10, 0, 25, 0, 64};
      r.enable_compression("powersgd:rank=2,start_iter=1",
                           rows);  // step 0 all-reduces whole gradients, step 1 compresses
    }
    cudaStream_t stream = nullptr;
    if (gpu()) {
      EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    }
    auto s = reinterpret_cast<gcommStream_t>(stream);
    const uint64_t before = pointer_lookups();
    for (bool sync : {true, true, false, true}) {
      r.begin_step(sync);
      for (size_t i = tensors.size(); i-- > 0;) r.mark_ready(i, s);
      r.finalize(s);
    }
    const uint64_t asked = pointer_lookups() - before;
    if (gpu()) {
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    }
    return asked;
  }
};

TEST_P(ReducerDriverQueries, AStepAsksNothing) {
  const Variant variants[] = {
      {"packed", false, kWireSameAsGrad, false, false},
      {"packed, f16 wire, scaler", false, gcommFloat16, true, false},
      {"views", true, kWireSameAsGrad, false, false},
      {"views, scaler", true, kWireSameAsGrad, true, false},
      {"PowerSGD, scaler", false, kWireSameAsGrad, true, true},
      {"views, PowerSGD, scaler", true, kWireSameAsGrad, true, true},
  };
  for (const Variant& v : variants) EXPECT_EQ(lookups_in_steps(v), 0u) << v.name;
}

// The counter moves for calls on caller-owned pointers: the kernels and the
// communicator still check those, one lookup per allocation or buffer.
TEST_P(ReducerDriverQueries, CallerPointersAreStillLookedUp) {
  Grads g(gpu());
  void* bucket = nullptr;
  size_t total = 0;
  for (auto& t : g.tensors) total += t.count;
  if (gpu())
    ASSERT_EQ(cudaMalloc(&bucket, total * 4), cudaSuccess);
  else
    bucket = std::malloc(total * 4);
  const uint64_t before = pointer_lookups();
  kernels::pack(g.tensors.data(), g.tensors.size(), nullptr, bucket, gcommFloat32, 1.0f, nullptr,
                kernels::Target{device(), nullptr});
  EXPECT_GE(pointer_lookups() - before, 1u);  // the bucket (and, on a GPU, each gradient's allocation)
  if (gpu()) {
    EXPECT_GE(pointer_lookups() - before, 1u + g.tensors.size());
  }

  auto transports = make_local_transports(1, device(), 30.0);
  Communicator comm(std::move(transports[0]), 30.0);
  CollectiveArgs a;
  a.send = bucket;
  a.recv = bucket;
  a.count = total;
  const uint64_t mid = pointer_lookups();
  comm.collective(a);
  EXPECT_EQ(pointer_lookups() - mid, 1u);  // in place: one lookup answers for both
  a.buffers_known = true;
  comm.collective(a);
  EXPECT_EQ(pointer_lookups() - mid, 1u);
  if (gpu()) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaFree(bucket), cudaSuccess);
  } else {
    std::free(bucket);
  }
}

INSTANTIATE_TEST_SUITE_P(, ReducerDriverQueries, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Gpu" : "Host"; });

}  // namespace
}  // namespace gradcomm::reducer
