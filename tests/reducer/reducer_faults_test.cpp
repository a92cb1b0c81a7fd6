// Allocation failures injected at every allocation site the reducer reaches
// (creation, the first step's plan rebuild): each surfaces as gcommOutOfMemory,
// nothing leaks or crashes (the sanitizer stages run this), a reducer that failed
// mid-step refuses further steps with the first failure's reason, and a peer of a
// failed rank gets a clear error within its timeout instead of hanging.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/local/local_transport.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/events/event_source.hpp"
#include "memory/upstream/upstream.hpp"
#include "reducer/reducer.hpp"

namespace gradcomm::reducer {

using namespace gradcomm::comm;  // the floor below: communicators, transports
namespace {

std::unique_ptr<memory::CachingAllocator> host_allocator() {
  return std::make_unique<memory::CachingAllocator>(memory::make_host_upstream(),
                                                    std::make_unique<memory::ImmediateEvents>());
}

std::vector<std::unique_ptr<Communicator>> communicators(int n, double timeout_s) {
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& t : make_local_transports(n, gcommHostDevice(), timeout_s))
    comms.push_back(std::make_unique<Communicator>(std::move(t), timeout_s));
  return comms;
}

struct Grads {
  std::vector<std::vector<float>> data;
  std::vector<gcommTensor_t> tensors;
  Grads() {
    for (size_t n : {300, 5, 1000, 77}) {
      data.emplace_back(n, 1.5f);
      tensors.push_back(gcommTensor_t{data.back().data(), n, gcommFloat32});
    }
  }
};

ReducerOptions small_buckets() {
  ReducerOptions o;
  o.bucket_cap_bytes = 1024;
  o.first_bucket_bytes = 512;
  return o;
}

void step(Reducer& r, size_t n) {
  r.begin_step(true);
  for (size_t i = 0; i < n; ++i)
    r.mark_ready(i, nullptr);  // registration order: the rebuild changes the plan
  r.finalize(nullptr);
}

// Host memory that says it is GPU 0's: what a caller's allocator of the wrong
// device looks like to the reducer.
class HostMemoryCalledGpu0 : public memory::Upstream {
 public:
  void* allocate(size_t bytes) override { return host_->allocate(bytes); }
  void deallocate(void* p, size_t bytes) noexcept override { host_->deallocate(p, bytes); }
  gcommDevice_t device() const noexcept override { return gcommCudaDevice(0); }
  const char* kind_name() const noexcept override { return "device memory"; }

 private:
  std::unique_ptr<memory::Upstream> host_ = memory::make_host_upstream();
};

// The GPU contract suite gave its GPU reducers a host allocator: every step failed
// at its first copy with "cudaMemcpyAsync ... invalid argument". Refused at creation.
TEST(ReducerFaults, AnAllocatorOfAnotherDeviceIsRefusedAtCreation) {
  auto comms = communicators(1, 5.0);
  Grads g;
  auto other = std::make_unique<memory::CachingAllocator>(std::make_unique<HostMemoryCalledGpu0>(),
                                                          std::make_unique<memory::ImmediateEvents>());
  try {
    Reducer r(*comms[0], g.tensors.data(), g.tensors.size(), small_buckets(), nullptr, std::move(other));
    FAIL() << "a reducer on the host took an allocator of GPU 0's memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("the allocator is on cuda:0 but the communicator is on"),
              std::string::npos)
        << e.what();
  }
  Reducer fine(*comms[0], g.tensors.data(), g.tensors.size(), small_buckets(), nullptr, host_allocator());
}

TEST(ReducerFaults, EveryAllocationSiteFailsCleanlyWithOutOfMemory) {
  Grads g;
  auto comms = communicators(1, 5.0);
  uint64_t sites = 0;
  {
    Reducer r(*comms[0], g.tensors.data(), g.tensors.size(), small_buckets(), nullptr, host_allocator());
    step(r, g.tensors.size());
    step(r, g.tensors.size());
    sites = r.allocator().allocate_calls();
  }
  ASSERT_GE(sites, 3u);  // flags, wire, and the rebuild's staging and new wire
  for (uint64_t k = 0; k < sites; ++k) {
    SCOPED_TRACE("failing allocation " + std::to_string(k));
    auto alloc = host_allocator();
    alloc->inject_failure_after(k);
    std::unique_ptr<Reducer> r;
    try {
      r = std::make_unique<Reducer>(*comms[0], g.tensors.data(), g.tensors.size(), small_buckets(), nullptr,
                                    std::move(alloc));
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), gcommOutOfMemory) << e.what();
      continue;
    }
    bool failed = false;
    for (int s = 0; s < 2 && !failed; ++s) {
      try {
        step(*r, g.tensors.size());
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), gcommOutOfMemory) << e.what();
        failed = true;
      }
    }
    ASSERT_TRUE(failed) << "no step reported the injected failure";
    try {
      r->begin_step(true);
      ADD_FAILURE() << "a failed reducer began another step";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), gcommOutOfMemory);
      EXPECT_NE(std::string(e.what()).find("failed in an earlier step"), std::string::npos) << e.what();
    }
  }
}

// Enabling PowerSGD on views moves the gradients. An allocation failing at any
// point of it is reported, and every gradient address the reducer then hands out
// still holds the gradient's values (the old ones, or the moved copy).
TEST(ReducerFaults, PowerSgdOnViewsFailingToAllocateLosesNoGradient) {
  auto comms = communicators(1, 5.0);
  const size_t counts[] = {300, 5, 1000, 77};
  const size_t rows[] = {10, 0, 20, 0};  // 10 x 30 and 20 x 50 are compressed at rank 1
  gcommPowerSgdConfig_t p = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  p.rank = 1;
  bool enabled = false;
  for (uint64_t k = 0; !enabled && k < 32; ++k) {
    SCOPED_TRACE("failing allocation " + std::to_string(k) + " of the enable");
    std::vector<gcommTensor_t> tensors;
    for (size_t n : counts) tensors.push_back(gcommTensor_t{nullptr, n, gcommFloat32});
    ReducerOptions o = small_buckets();
    o.grad_as_bucket_view = true;
    o.rebuild_buckets = false;
    Reducer r(*comms[0], tensors.data(), tensors.size(), o, nullptr, host_allocator());
    std::vector<void*> before;
    for (size_t i = 0; i < tensors.size(); ++i) {
      before.push_back(r.grad_data(i));
      float* f = static_cast<float*>(before.back());
      for (size_t j = 0; j < counts[i]; ++j) f[j] = static_cast<float>(i * 10000 + j) + 0.5f;
    }
    r.allocator().inject_failure_after(k);
    try {
      r.enable_compression(gcommCompressionPowerSgd, &p, rows);
      enabled = true;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), gcommOutOfMemory) << e.what();
    }
    r.allocator().clear_injected_failure();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const float* f = static_cast<const float*>(r.grad_data(i));
      if (enabled && rows[i] != 0) {
        EXPECT_NE(f, before[i]) << "compressed gradient " << i << " did not move";
      }
      for (size_t j = 0; j < counts[i]; ++j)
        ASSERT_EQ(f[j], static_cast<float>(i * 10000 + j) + 0.5f) << "gradient " << i << " element " << j;
    }
  }
  EXPECT_TRUE(enabled) << "PowerSGD was never enabled";
}

// Rank 0 runs out of memory in the rebuild, before the broadcast; rank 1 must not hang.
TEST(ReducerFaults, APeerOfARankThatFailedGetsAnErrorWithinTheTimeout) {
  const double timeout_s = 0.5;
  auto comms = communicators(2, timeout_s);
  std::vector<Grads> grads(2);
  std::vector<gcommStatus_t> status(2, gcommSuccess);
  std::vector<std::string> message(2);
  std::vector<std::thread> ranks;
  auto start = std::chrono::steady_clock::now();
  for (int rank = 0; rank < 2; ++rank)
    ranks.emplace_back([&, rank] {
      try {
        Reducer r(*comms[rank], grads[rank].tensors.data(), grads[rank].tensors.size(), small_buckets(),
                  nullptr, host_allocator());
        if (rank == 0) r.allocator().inject_failure_after(0);  // the rebuild's first allocation
        step(r, grads[rank].tensors.size());
      } catch (const Error& e) {
        status[rank] = e.status();
        message[rank] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status[0], gcommOutOfMemory) << message[0];
  EXPECT_TRUE(status[1] == gcommTimeout || status[1] == gcommRemoteError) << message[1];
  EXPECT_NE(message[1].find("broadcast"), std::string::npos) << message[1];
  EXPECT_LT(seconds, 10 * timeout_s + 5.0);
}

}  // namespace
// Sharded mode: when set_params cannot allocate its staging buffer, the reducer
// has no parameters afterwards (the gather refuses), and a retry works.
TEST(ReducerFaults, AFailedSetParamsLeavesNoParametersBehind) {
  Grads g, params;
  auto comms = communicators(1, 5.0);
  ReducerOptions o = small_buckets();
  o.sharded = true;
  auto alloc = host_allocator();
  memory::CachingAllocator* a = alloc.get();
  Reducer r(*comms[0], g.tensors.data(), g.tensors.size(), o, nullptr, std::move(alloc));
  a->inject_failure_after(0);  // the next allocation: set_params' staging buffer
  try {
    r.set_params(params.tensors.data(), params.tensors.size());
    FAIL() << "the injected failure was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommOutOfMemory) << e.what();
  }
  try {
    r.all_gather_params(GCOMM_ALL_BUCKETS, nullptr);
    FAIL() << "gathered parameters after a failed set_params";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidState) << e.what();
    EXPECT_NE(std::string(e.what()).find("no parameters registered"), std::string::npos) << e.what();
  }
  // It fails once: the retry allocates.
  r.set_params(params.tensors.data(), params.tensors.size());
  r.all_gather_params(GCOMM_ALL_BUCKETS, nullptr);
}

}  // namespace gradcomm::reducer
