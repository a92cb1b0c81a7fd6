// The reducer on a host communicator's lane (comm/host_lane.hpp; its own tests in
// tests/comm/host_lane_test.cpp): a host rank's mark-ready calls return while its
// bucket's collective still waits for a peer (before the lane, the call that
// completed a bucket ran its all-reduce and blocked until every peer arrived), and
// the collectives of two reducers and of the caller on one communicator keep their
// program order.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "reducer/reducer_rig.hpp"

namespace gradcomm::test {
namespace {

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

// Through the C API, as a user turns it off without a code change (the parsing,
// malformed values included, is tests/reducer/reducer_options_test.cpp's).
TEST_P(ReducerHostThread, WithTheThreadOffBucketsRunInsideMarkReady) {
  ASSERT_EQ(setenv("GRADCOMM_REDUCER_HOST_THREAD", "0", 1), 0);
  const bool in_time = marks_return_before_the_peer_arrives(std::chrono::milliseconds(300));
  unsetenv("GRADCOMM_REDUCER_HOST_THREAD");
  EXPECT_FALSE(in_time);
}

// Two models on one communicator (a GAN's generator and discriminator, a teacher
// and a student), their backward passes interleaved bucket by bucket, and a
// collective of the caller's own in the middle of the step; every bucket the same
// size, so a collective issued out of order would silently sum one model's bucket
// with the other's (with a thread per reducer they raced on the communicator).
TEST_P(ReducerHostThread, TwoReducersAndTheCallerOnOneCommunicatorKeepProgramOrder) {
  auto comms = make_comms(2);
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::vector<GradMem> a, b;
    std::vector<gcommTensor_t> ta, tb;
    for (size_t i = 0; i < kGrads; ++i) {
      a.emplace_back(gcommFloat32, kCount, false);
      b.emplace_back(gcommFloat32, kCount, false);
      ta.push_back(a.back().tensor());
      tb.push_back(b.back().tensor());
    }
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    c.bucket_cap_bytes = c.first_bucket_bytes = kCount * sizeof(float);
    c.rebuild_buckets = 0;
    gcommReducer_t ra = nullptr, rb = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, ta.data(), ta.size(), &c, &ra));
    RIG_CHECK(gcommReducerCreate(comm, tb.data(), tb.size(), &c, &rb));
    auto value = [](int model, int step, size_t i, int r) {
      return model * 1000.0f + step * 10.0f + i + 2 * r;
    };
    for (int step = 0; step < 20; ++step) {
      for (size_t i = 0; i < kGrads; ++i) {
        std::fill_n(static_cast<float*>(a[i].data), kCount, value(1, step, i, rank));
        std::fill_n(static_cast<float*>(b[i].data), kCount, value(-1, step, i, rank));
      }
      RIG_CHECK(gcommReducerBeginStep(ra, 1));
      RIG_CHECK(gcommReducerBeginStep(rb, 1));
      for (size_t k = kGrads; k-- > 0;) {
        RIG_CHECK(gcommReducerMarkReady(ra, k, stream));
        RIG_CHECK(gcommReducerMarkReady(rb, k, stream));
        if (k == 2) {
          float x = static_cast<float>(rank + 1);
          RIG_CHECK(gcommAllReduce(comm, &x, &x, 1, gcommFloat32, gcommSum, stream));
          if (x != 3.0f) return "the caller's all-reduce gave " + std::to_string(x) + ", not 3";
        }
      }
      RIG_CHECK(gcommReducerFinalize(ra, stream, nullptr));
      RIG_CHECK(gcommReducerFinalize(rb, stream, nullptr));
      for (size_t i = 0; i < kGrads; ++i) {
        const float want_a = value(1, step, i, 0) + 1.0f,
                    want_b = value(-1, step, i, 0) + 1.0f;  // the two ranks' mean
        const float got_a = static_cast<const float*>(a[i].data)[kCount - 1];
        const float got_b = static_cast<const float*>(b[i].data)[0];
        if (got_a != want_a || got_b != want_b)
          return "step " + std::to_string(step) + " gradient " + std::to_string(i) + ": " +
                 std::to_string(got_a) + " and " + std::to_string(got_b) + ", not " + std::to_string(want_a) +
                 " and " + std::to_string(want_b);
      }
    }
    RIG_CHECK(gcommReducerDestroy(ra));
    RIG_CHECK(gcommReducerDestroy(rb));
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(, ReducerHostThread, ::testing::Values(RigDevice::kHost), rig_name);

}  // namespace
}  // namespace gradcomm::test
