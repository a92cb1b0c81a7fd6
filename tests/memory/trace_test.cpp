// A randomized trace checked against a simple model: thousands of random
// allocations (1 B to 400 MiB, on three streams), frees on the allocating
// stream or another one, record_stream, streams advancing at random, and
// release-cached. After every step: live blocks never overlap and lie inside
// upstream segments, no block is reused before the streams that used it have
// passed its free, and the statistics match the model exactly.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "allocator_fixture.hpp"

namespace gradcomm {
namespace memory {
namespace {

struct Live {
  size_t rounded;
  size_t requested;
  gcommStream_t stream;
  std::set<gcommStream_t> uses;
};
// A freed block: a new owner on stream T may overlap it only once every stream
// in `uses` other than T has passed event id `at`.
struct Freed {
  uintptr_t addr;
  size_t rounded;
  Event at;
  std::set<gcommStream_t> uses;
};

struct TraceConfig {
  const char* name;
  AllocatorOptions options;
  size_t capacity;
};
void PrintTo(const TraceConfig& c, std::ostream* os) {
  *os << c.name;
}

class TraceTest : public AllocatorTest, public ::testing::WithParamInterface<TraceConfig> {
 protected:
  size_t random_size() {
    std::uniform_int_distribution<int> bucket(0, 9);
    int b = bucket(rng);
    double lo = 0, hi = 12;  // log2 bounds: 1 B .. 4 KiB
    if (b >= 4 && b < 7)
      lo = 12, hi = 20;  // 4 KiB .. 1 MiB
    else if (b >= 7 && b < 9)
      lo = 20, hi = 25;  // 1 .. 32 MiB
    else if (b == 9)
      lo = 25, hi = 28.6;  // 32 .. ~400 MiB
    std::uniform_real_distribution<double> e(lo, hi);
    return std::max<size_t>(1, static_cast<size_t>(std::exp2(e(rng))));
  }
  gcommStream_t random_stream() { return streams[std::uniform_int_distribution<int>(0, 2)(rng)]; }

  bool passed(const Freed& f, gcommStream_t t) const {
    for (gcommStream_t s : f.uses)
      if (s != t && events.last_completed_on(s) <= f.at) return false;
    return true;
  }

  void check_new_block(uintptr_t a, size_t rounded, gcommStream_t stream) {
    ASSERT_EQ(a % 512, 0u);
    ASSERT_TRUE(upstream.owns(reinterpret_cast<void*>(a), rounded)) << "block outside every segment";
    auto next = live.lower_bound(a);
    if (next != live.end()) {
      ASSERT_GE(next->first, a + rounded) << "overlaps the next live block";
    }
    if (next != live.begin()) {
      auto prev = std::prev(next);
      ASSERT_LE(prev->first + prev->second.rounded, a) << "overlaps the previous live block";
    }
    for (const Freed& f : freed) {
      if (f.addr < a + rounded && a < f.addr + f.rounded) {
        ASSERT_TRUE(passed(f, stream)) << "reused before every stream that used it passed the free";
      }
    }
  }

  void check_stats() {
    AllocatorStats st = stats();
    size_t requested = 0, rounded = 0;
    for (const auto& kv : live) {
      requested += kv.second.requested;
      rounded += kv.second.rounded;
    }
    ASSERT_EQ(st.requested_bytes.all().current, requested);
    ASSERT_EQ(st.allocated_blocks.all().current, live.size());
    ASSERT_GE(st.allocated_bytes.all().current, rounded);
    ASSERT_LE(st.allocated_bytes.all().current, st.reserved_bytes.all().current);
    ASSERT_GE(st.active_blocks.all().current, live.size());
    ASSERT_EQ(st.reserved_bytes.all().current, upstream.live_bytes());
    ASSERT_EQ(st.segments.all().current, upstream.live_allocations());
    ASSERT_EQ(st.upstream_allocs - st.upstream_frees, upstream.live_allocations());
    ASSERT_EQ(st.reserved_bytes.all().current,
              st.reserved_bytes.pool[kSmallPool].current + st.reserved_bytes.pool[kLargePool].current);
    ASSERT_GE(st.reserved_bytes.all().peak, st.reserved_bytes.all().current);
    ASSERT_EQ(st.malloc_calls, mallocs);
    ASSERT_EQ(st.ooms, ooms);
  }

  void step() {
    std::uniform_int_distribution<int> op(0, 99);
    int o = live.size() > 60 ? 50 : op(rng);
    if (o < 45) {
      size_t bytes = random_size();
      gcommStream_t s = random_stream();
      ++mallocs;
      void* p = nullptr;
      try {
        p = alloc->allocate(bytes, s);
      } catch (const Error& e) {
        ASSERT_EQ(e.status(), gcommOutOfMemory) << e.message();
        ++ooms;
        return;
      }
      uintptr_t a = reinterpret_cast<uintptr_t>(p);
      ASSERT_NO_FATAL_FAILURE(check_new_block(a, round_size(bytes), s));
      live[a] = Live{round_size(bytes), bytes, s, {s}};
    } else if (o < 85 && !live.empty()) {
      auto it = std::next(live.begin(), std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      gcommStream_t s = op(rng) < 80 ? it->second.stream : random_stream();
      Freed f{it->first, it->second.rounded, events.last_event(), it->second.uses};
      alloc->deallocate(reinterpret_cast<void*>(it->first), s);
      f.uses.insert(s);  // other streams must also wait for the free point on s
      freed.push_back(f);
      live.erase(it);
    } else if (o < 93 && !live.empty()) {
      auto it = std::next(live.begin(), std::uniform_int_distribution<size_t>(0, live.size() - 1)(rng));
      gcommStream_t s = random_stream();
      alloc->record_stream(reinterpret_cast<void*>(it->first), s);
      it->second.uses.insert(s);
    } else if (o < 99) {
      events.complete_stream(random_stream());
    } else {
      alloc->release_cached();
    }
  }

  std::mt19937_64 rng{12345};
  gcommStream_t streams[3] = {s0, s1, s2};
  std::map<uintptr_t, Live> live;
  std::vector<Freed> freed;
  uint64_t mallocs = 0;
  uint64_t ooms = 0;
};

TEST_P(TraceTest, RandomTraceMatchesTheModel) {
  upstream.set_capacity(GetParam().capacity);
  make(GetParam().options);
  for (int i = 0; i < 6000; ++i) {
    ASSERT_NO_FATAL_FAILURE(step()) << "step " << i;
    ASSERT_NO_FATAL_FAILURE(check_stats()) << "step " << i;
    if (i % 64 == 0)  // forget freed blocks every stream has passed
      freed.erase(
          std::remove_if(freed.begin(), freed.end(), [&](const Freed& f) { return passed(f, nullptr); }),
          freed.end());
  }
  for (const auto& kv : live) alloc->deallocate(reinterpret_cast<void*>(kv.first), kv.second.stream);
  live.clear();
  alloc->release_cached();
  AllocatorStats st = stats();
  EXPECT_EQ(st.allocated_bytes.all().current, 0u);
  EXPECT_EQ(st.allocated_bytes.all().total_allocated, st.allocated_bytes.all().total_freed);
  EXPECT_EQ(st.active_blocks.all().current, 0u);
  EXPECT_EQ(st.reserved_bytes.all().current, 0u);
  EXPECT_EQ(upstream.live_allocations(), 0u);
  EXPECT_EQ(events.outstanding(), 0u);
  EXPECT_GT(st.cache_hits, 100u);
  if (GetParam().capacity < (size_t{1} << 40)) {
    EXPECT_GT(ooms, 0u) << "the tight configuration should run out of memory sometimes";
  }
}

AllocatorOptions with(uint64_t max_split, uint64_t threshold) {
  AllocatorOptions o;
  o.max_split_size = max_split;
  o.release_threshold = threshold;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, TraceTest,
    ::testing::Values(TraceConfig{"defaults", AllocatorOptions{}, size_t{1} << 50},
                      TraceConfig{"max_split_64MiB_threshold_256MiB", with(64 * kMiB, 256 * kMiB),
                                  size_t{1} << 50},
                      TraceConfig{"tight_1GiB", with(kUnlimited, kUnlimited), size_t{1} << 30}),
    [](const ::testing::TestParamInfo<TraceConfig>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace memory
}  // namespace gradcomm
