// Thread-safety smoke test: several threads allocate, record, free and query
// one allocator at once while another completes events.
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

using ThreadTest = AllocatorTest;

TEST_F(ThreadTest, ConcurrentCallsKeepTheCacheConsistent) {
  constexpr int kThreads = 4;
  constexpr int kSteps = 3000;
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop.load()) {
      events.complete_all();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      gcommStream_t mine = stream_token(0x1000 * (t + 1));
      std::vector<std::pair<char*, size_t>> held;
      for (int i = 0; i < kSteps; ++i) {
        if (held.size() < 16 && rng() % 2 == 0) {
          size_t bytes = size_t{1} << (rng() % 24);
          char* p = static_cast<char*>(alloc->allocate(bytes, mine));
          if (p == nullptr) ++errors;
          held.emplace_back(p, bytes);
          if (rng() % 8 == 0) alloc->record_stream(p, s1);
        } else if (!held.empty()) {
          alloc->deallocate(held.back().first, rng() % 4 == 0 ? s2 : mine);
          held.pop_back();
        }
        if (i % 500 == 0) {
          (void)alloc->stats();
          (void)alloc->summary();
        }
        if (t == 0 && i % 1000 == 999) alloc->release_cached();
      }
      for (auto& h : held) alloc->deallocate(h.first, mine);
    });
  }
  for (auto& w : workers) w.join();
  stop = true;
  completer.join();
  EXPECT_EQ(errors.load(), 0);
  AllocatorStats st = stats();
  EXPECT_EQ(st.allocated_blocks.all().current, 0u);
  EXPECT_EQ(st.allocated_bytes.all().current, 0u);
  EXPECT_EQ(st.free_calls, st.malloc_calls);
  alloc->release_cached();
  EXPECT_EQ(stats().reserved_bytes.all().current, 0u);
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
