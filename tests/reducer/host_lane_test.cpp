// The host reducer's side thread (reducer/host_lane.hpp): queued work runs in
// order, an error is kept and skips what follows, and a host rank's mark-ready
// calls return while its bucket's collective still waits for a peer, so the
// collectives overlap backward (before the thread, the call that completed a
// bucket ran its all-reduce and blocked until every peer arrived).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "reducer/host_lane.hpp"
#include "reducer/reducer_rig.hpp"

namespace gradcomm::test {
namespace {

using reducer::HostLane;

TEST(HostLane, RunsQueuedWorkInOrderOffTheCallersThread) {
  HostLane lane;
  std::vector<int> seen;
  std::thread::id worker;
  for (int i = 0; i < 100; ++i)
    lane.push([&seen, &worker, i] {
      seen.push_back(i);
      worker = std::this_thread::get_id();
    });
  lane.drain();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(HostLane, AnErrorSkipsWhatFollowsAndIsThrownAtEveryLaterWait) {
  HostLane lane;
  std::atomic<int> ran{0};
  std::atomic<bool> go{false};
  lane.push([&] {  // holds the lane until all three are queued
    while (!go.load()) std::this_thread::yield();
    ++ran;
  });
  lane.push([] { throw std::runtime_error("bucket 1 failed"); });
  lane.push([&] { ++ran; });
  go = true;
  lane.wait_idle();  // the reader's wait does not throw
  EXPECT_EQ(ran.load(), 1);
  for (int i = 0; i < 2; ++i) {
    try {
      lane.drain();
      ADD_FAILURE() << "drain did not throw the queued work's error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "bucket 1 failed");
    }
  }
  EXPECT_THROW(lane.push([&] { ++ran; }), std::runtime_error);
  EXPECT_EQ(ran.load(), 1);
}

TEST(HostLane, WorkThatDrainsItsOwnLaneDoesNotDeadlock) {
  HostLane lane;
  std::atomic<bool> done{false};
  lane.push([&] {
    lane.drain();  // as a strategy's synchronize() on the side stream would
    done = true;
  });
  lane.drain();
  EXPECT_TRUE(done.load());
}

class ReducerHostThread : public ReducerRig {
 protected:
  static constexpr size_t kGrads = 4;
  static constexpr size_t kCount = 1000;

  // Rank 0 marks every gradient (each its own bucket) while rank 1 has not
  // begun its step: rank 1 waits up to `wait` for rank 0's marks to return
  // before it begins. Returns whether they returned in time; the step completes
  // either way and both ranks check the averaged result.
  bool marks_return_before_the_peer_arrives(std::chrono::milliseconds wait) {
    std::atomic<bool> marked{false};
    std::atomic<bool> in_time{false};
    auto comms = make_comms(2);
    run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::vector<GradMem> mem;
      std::vector<gcommTensor_t> tensors;
      for (size_t i = 0; i < kGrads; ++i) {
        mem.emplace_back(gcommFloat32, kCount, false);
        std::fill_n(static_cast<float*>(mem.back().data), kCount, static_cast<float>(rank + 1));
        tensors.push_back(mem.back().tensor());
      }
      gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
      c.bucket_cap_bytes = c.first_bucket_bytes = kCount * sizeof(float);
      c.rebuild_buckets = 0;
      gcommReducer_t r = nullptr;
      RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &c, &r));
      if (rank == 1) {
        const auto until = std::chrono::steady_clock::now() + wait;
        while (!marked.load() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        in_time = marked.load();
      }
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t k = kGrads; k-- > 0;) RIG_CHECK(gcommReducerMarkReady(r, k, stream));
      if (rank == 0) marked = true;
      RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
      for (size_t i = 0; i < kGrads; ++i)
        for (size_t j = 0; j < kCount; ++j)
          if (const float v = static_cast<const float*>(mem[i].data)[j]; v != 1.5f)
            return "gradient " + std::to_string(i) + " holds " + std::to_string(v) + ", not 1.5";
      RIG_CHECK(gcommReducerDestroy(r));
      return "";
    });
    return in_time.load();
  }
};

TEST_P(ReducerHostThread, MarkReadyReturnsWhileTheBucketsCollectiveWaitsForAPeer) {
  // Before the side thread this waited the whole 5 s: rank 0's mark of the first
  // complete bucket ran its all-reduce, which waits for rank 1.
  EXPECT_TRUE(marks_return_before_the_peer_arrives(std::chrono::seconds(5)));
}

TEST_P(ReducerHostThread, WithTheThreadOffBucketsRunInsideMarkReady) {
  ASSERT_EQ(setenv("GRADCOMM_REDUCER_HOST_THREAD", "0", 1), 0);
  const bool in_time = marks_return_before_the_peer_arrives(std::chrono::milliseconds(300));
  unsetenv("GRADCOMM_REDUCER_HOST_THREAD");
  EXPECT_FALSE(in_time);
}

TEST_P(ReducerHostThread, AMalformedSettingKeepsTheThread) {
  // As every knob but the timeout: a warning, and the default.
  ASSERT_EQ(setenv("GRADCOMM_REDUCER_HOST_THREAD", "yes", 1), 0);
  const bool in_time = marks_return_before_the_peer_arrives(std::chrono::seconds(5));
  unsetenv("GRADCOMM_REDUCER_HOST_THREAD");
  EXPECT_TRUE(in_time);
}

INSTANTIATE_TEST_SUITE_P(, ReducerHostThread, ::testing::Values(RigDevice::kHost), rig_name);

}  // namespace
}  // namespace gradcomm::test
