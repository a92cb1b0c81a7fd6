// The strategy contract (reducer/strategy.hpp), one suite for every entry of the
// compression table (reducer/compressions.cpp), each under its contract_options,
// through a real Reducer on two local ranks, on the host and on GPU 0 (skipped
// without a GPU):
//   1. every rank issues the same collectives in the same order, whatever its data;
//   2. a gradient a rank never marked counts as zero;
//   3. a step with Inf or NaN (in a compressed gradient or not) raises the step's
//      flag on every rank and leaves the state as it was, but for a step counter;
//   4. the state saved by one reducer, loaded into another, saves the same and
//      steps the same; another kind's state is refused and changes nothing;
//   5. a step allocates nothing (the reducer's allocator counts its calls);
//   6. an option the kind does not have is refused;
//   7. across a membership change (docs/fault-tolerance.md): the shared state is
//      the same bytes on every rank and loads on a reducer of another world, which
//      saves it alike; a rank's whole state carries to its reducer of another world
//      (StateOrigin::kEarlierWorld) with the shared part kept, and carrying a shared
//      state then keeps that rank's residual.
// A new compression adds its table line and is held to all of it, with no test
// written for it here. The suite is shown to fail (StrategyContract.CatchesEach...)
// on fakes that each break one rule.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/local/local_transport.hpp"
#include "common/error.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/events/event_source.hpp"
#include "memory/upstream/upstream.hpp"
#include "reducer/compressions.hpp"
#include "reducer/reducer.hpp"
#include "reducer/strategies/allreduce.hpp"
#include "support/gpu.hpp"

namespace gradcomm::reducer {
namespace {

// A strategy under test: its name and how it is made.
struct Subject {
  std::string name;
  Reducer::StrategyMaker make;
};

// Four gradients: two matrices (rows given: 64x64, 32x48), a bias, a long vector.
const std::vector<size_t> kSizes = {4096, 1536, 64, 5000};
const size_t kRows[] = {64, 32, 0, 0};
constexpr int kWorld = 2;

using Grads = std::vector<std::vector<float>>;

// Rank r's gradients at step t: different on every rank, step and gradient, with
// rank 1's first matrix all zeros (a rank whose data could change a decision).
Grads inputs(int r, int t) {
  Grads g;
  for (size_t k = 0; k < kSizes.size(); ++k) {
    g.emplace_back(kSizes[k]);
    for (size_t i = 0; i < kSizes[k]; ++i)
      g[k][i] = (r == 1 && k == 0) ? 0.0f
                                   : std::sin(static_cast<float>(i * 7 + k * 131 + t * 17 + r * 1009)) *
                                         (1.0f + static_cast<float>((i + k) % 5) * (r + 1));
  }
  return g;
}

std::unique_ptr<memory::CachingAllocator> host_allocator() {
  return std::make_unique<memory::CachingAllocator>(memory::make_host_upstream(),
                                                    std::make_unique<memory::ImmediateEvents>());
}

// One rank's reducer over its own gradient memory (on the communicator's device),
// with `subject` enabled.
struct RankReducer {
  bool gpu;
  Grads mem;                  // host: the gradients; GPU: what was copied in or out last
  std::vector<float*> where;  // the gradients the reducer sees
  std::unique_ptr<Reducer> r;
  RankReducer(comm::Communicator& comm, const Subject& subject, bool unused_as_zero = false)
      : gpu(comm.device().kind == gcommDeviceCuda) {
    std::vector<gcommTensor_t> tensors;
    for (size_t n : kSizes) {
      mem.emplace_back(n, 0.0f);
      float* p = mem.back().data();
      if (gpu) {
        require(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)) == cudaSuccess, "cudaMalloc");
        require(cudaMemset(p, 0, n * sizeof(float)) == cudaSuccess, "cudaMemset");
      }
      where.push_back(p);
      tensors.push_back(gcommTensor_t{p, n, gcommFloat32});
    }
    ReducerOptions o;
    o.bucket_cap_bytes = 16 << 10;  // several buckets
    o.first_bucket_bytes = 8 << 10;
    o.rebuild_buckets = false;
    o.unused_as_zero = unused_as_zero;
    // On a GPU the reducer's own allocator (device memory): a host one is refused.
    r = std::make_unique<Reducer>(comm, tensors.data(), tensors.size(), o, nullptr,
                                  gpu ? nullptr : host_allocator());
    r->enable_compression(subject.name.c_str(), subject.make, kRows);
  }
  ~RankReducer() {
    r.reset();
    if (gpu)
      for (float* p : where) (void)cudaFree(p);
  }
  RankReducer(const RankReducer&) = delete;
  RankReducer& operator=(const RankReducer&) = delete;
  // One synced step: `g` into the gradients, every gradient marked but `skip` (on
  // this rank); the gradients after, and whether the step saw Inf/NaN.
  Grads step(const Grads& g, bool* found_inf = nullptr, int skip = -1) {
    r->begin_step(true);
    for (size_t k = kSizes.size(); k-- > 0;) {
      mem[k] = g[k];
      if (gpu)
        require(cudaMemcpy(where[k], g[k].data(), g[k].size() * sizeof(float), cudaMemcpyHostToDevice) ==
                    cudaSuccess,
                "cudaMemcpy");
      if (static_cast<int>(k) != skip) r->mark_ready(k, nullptr);
    }
    r->finalize(nullptr);
    const bool inf = r->read_found_inf(nullptr);  // synchronizes the stream
    if (found_inf != nullptr) *found_inf = inf;
    if (gpu)
      for (size_t k = 0; k < kSizes.size(); ++k)
        require(cudaMemcpy(mem[k].data(), where[k], mem[k].size() * sizeof(float), cudaMemcpyDeviceToHost) ==
                    cudaSuccess,
                "cudaMemcpy");
    return mem;
  }
};

// The device every rank of a check runs on (GPU 0 for the GPU instantiation).
thread_local gcommDevice_t t_device = gcommHostDevice();

// body(rank, comm) on a thread per local rank of t_device (`world` of them); the
// first error of any rank ("" if none).
std::string on_ranks(const std::function<std::string(int, comm::Communicator&)>& body, int world = kWorld) {
  const gcommDevice_t device = t_device;
  std::vector<std::unique_ptr<comm::Communicator>> comms;
  for (auto& t : comm::make_local_transports(world, device, 10.0))
    comms.push_back(std::make_unique<comm::Communicator>(std::move(t), 10.0));
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        if (device.kind == gcommDeviceCuda)
          require(cudaSetDevice(device.ordinal) == cudaSuccess, "cudaSetDevice");
        errors[r] = body(r, *comms[r]);
      } catch (...) {
        errors[r] = as_error(std::current_exception()).message();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r)
    if (!errors[r].empty()) return "rank " + std::to_string(r) + ": " + errors[r];
  return "";
}

bool same_bits(const Grads& a, const Grads& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size() || std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// Whether `after` is `before` but for one 8-byte counter (little-endian) that went up by one.
bool same_but_a_step_counter(const std::vector<uint8_t>& before, const std::vector<uint8_t>& after) {
  if (before.size() != after.size()) return false;
  size_t first = before.size(), last = 0;
  for (size_t i = 0; i < before.size(); ++i)
    if (before[i] != after[i]) {
      first = std::min(first, i);
      last = i;
    }
  if (first == before.size()) return true;
  // The counter may sit anywhere: every 8-byte window that holds all the changed bytes.
  for (size_t at = last >= 7 ? last - 7 : 0; at <= first && at + 8 <= before.size(); ++at) {
    uint64_t a = 0, b = 0;
    std::memcpy(&a, before.data() + at, 8);
    std::memcpy(&b, after.data() + at, 8);
    if (b == a + 1) return true;
  }
  return false;
}

// ---- the rules: each returns "" or how the subject broke it ----

std::string issues_the_same_collectives_on_every_rank(const Subject& s) {
  return on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    RankReducer rr(comm, s);
    for (int t = 0; t < 3; ++t) {
      Grads g = inputs(rank, t);
      if (rank == 0 && t == 1)
        for (float& x : g[3]) x *= 1e6f;  // one rank's values far larger
      rr.step(g);
    }
    return "";
  });
}

std::string counts_an_unmarked_gradient_as_zero(const Subject& s) {
  return on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    for (int k = 0; k < static_cast<int>(kSizes.size()); ++k) {
      RankReducer unmarked(comm, s, /*unused_as_zero=*/true), zeros(comm, s, true);
      // A step with every gradient first: what it leaves in the buckets must not
      // stand in for the gradient that is not marked in the next.
      unmarked.step(inputs(rank, 0));
      zeros.step(inputs(rank, 0));
      const Grads g = inputs(rank, 1);
      Grads z = g;
      if (rank == 1) std::fill(z[k].begin(), z[k].end(), 0.0f);
      const Grads a = unmarked.step(g, nullptr, rank == 1 ? k : -1);
      const Grads b = zeros.step(z);
      if (!same_bits(a, b))
        return "gradient " + std::to_string(k) + " left unmarked by rank 1 did not count as zeros";
    }
    return "";
  });
}

std::string skips_an_inf_step_and_keeps_its_state(const Subject& s) {
  return on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    RankReducer rr(comm, s);
    rr.step(inputs(rank, 0));
    // In a compressed matrix, then in a bias (issue 17 #4: compressed buckets committed
    // before a NaN elsewhere was seen).
    for (const auto& [k, bad] : {std::pair<size_t, float>{0, std::numeric_limits<float>::infinity()},
                                 std::pair<size_t, float>{2, std::numeric_limits<float>::quiet_NaN()}}) {
      const std::vector<uint8_t> before = rr.r->save_compression();
      Grads g = inputs(rank, 1);
      if (rank == 1) g[k][k + 3] = bad;
      bool found = false;
      rr.step(g, &found);
      if (!found)
        return "a step with " + std::to_string(bad) + " in gradient " + std::to_string(k) +
               " was not flagged";
      if (!same_but_a_step_counter(before, rr.r->save_compression()))
        return "a step with " + std::to_string(bad) + " in gradient " + std::to_string(k) +
               " changed the state";
    }
    return "";
  });
}

std::string round_trips_its_state(const Subject& s, const std::vector<Subject>& others) {
  return on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    RankReducer a(comm, s), b(comm, s);
    a.step(inputs(rank, 0));
    a.step(inputs(rank, 1));
    const std::vector<uint8_t> state = a.r->save_compression();
    b.r->load_compression(state.data(), state.size());
    if (b.r->save_compression() != state) return "a loaded state does not save as it was";
    const Grads from_a = a.step(inputs(rank, 2));
    const Grads from_b = b.step(inputs(rank, 2));
    if (!same_bits(from_a, from_b)) return "a reducer that loaded the state steps differently";
    for (const Subject& other : others) {
      RankReducer o(comm, other);
      const std::vector<uint8_t> its = o.r->save_compression();
      try {
        o.r->load_compression(state.data(), state.size());
        return s.name + "'s state was loaded by " + other.name;
      } catch (const Error& e) {
        if (e.status() != gcommInvalidArgument) return "a foreign state: " + e.message();
      }
      if (o.r->save_compression() != its) return "a refused state changed " + other.name + "'s";
    }
    return "";
  });
}

std::string carries_its_state_across_worlds(const Subject& s) {
  std::mutex m;
  std::vector<std::vector<uint8_t>> shared(kWorld), whole(kWorld);
  const std::string e = on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    RankReducer rr(comm, s);
    rr.step(inputs(rank, 0));
    rr.step(inputs(rank, 1));
    std::vector<uint8_t> mine = rr.r->save_compression(StatePart::kShared), all = rr.r->save_compression();
    std::lock_guard<std::mutex> lock(m);
    shared[rank] = std::move(mine);
    whole[rank] = std::move(all);
    return "";
  });
  if (!e.empty()) return e;
  if (shared[0] != shared[1]) return "the shared state differs between ranks";
  // A world of three: rank 2 a newcomer (rank 1's shared state), rank 1 a survivor
  // (its own whole state from the world of two), rank 0 neither.
  return on_ranks(
      [&](int rank, comm::Communicator& comm) -> std::string {
        RankReducer rr(comm, s);
        if (rank == 2) {
          rr.r->load_compression(shared[1].data(), shared[1].size());
          if (rr.r->save_compression(StatePart::kShared) != shared[0])
            return "a loaded shared state does not save as it was";
        }
        if (rank == 1) {
          rr.r->load_compression(whole[1].data(), whole[1].size(), StateOrigin::kEarlierWorld);
          if (rr.r->save_compression(StatePart::kShared) != shared[1])
            return "a state carried to another world lost its shared part";
          // Adopting the job's shared part (rank 0's) keeps this rank's residual.
          const std::vector<uint8_t> carried = rr.r->save_compression();
          rr.r->load_compression(shared[0].data(), shared[0].size(), StateOrigin::kEarlierWorld);
          if (rr.r->save_compression() != carried) return "carrying a shared state lost this rank's residual";
        }
        return "";
      },
      3);
}

std::string allocates_nothing_in_a_step(const Subject& s) {
  return on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    RankReducer rr(comm, s);
    rr.step(inputs(rank, 0));
    const uint64_t calls = rr.r->allocator().allocate_calls();
    for (int t = 1; t < 4; ++t) rr.step(inputs(rank, t));
    const uint64_t more = rr.r->allocator().allocate_calls() - calls;
    return more == 0 ? "" : std::to_string(more) + " allocation(s) in three steps";
  });
}

// ---- the table's entries ----

std::vector<Subject> table_subjects() {
  std::vector<Subject> subjects;
  for (const CompressionEntry* e : compression_entries())
    subjects.push_back(Subject{e->name, [e](const StrategySetup& setup) {
                                 OptionText options(e->name, e->contract_options);
                                 return e->from_text(options, setup);
                               }});
  return subjects;
}

// An entry of the table, on the host or on GPU 0 (skipped without a GPU).
struct EntryOn {
  const CompressionEntry* entry;
  bool gpu;
};
void PrintTo(const EntryOn& w, std::ostream* os) {
  *os << w.entry->name << (w.gpu ? " on GPU 0" : " on the host");
}

class StrategyContractOf : public ::testing::TestWithParam<EntryOn> {
 protected:
  void SetUp() override {
    if (GetParam().gpu) GCOMM_SKIP_WITHOUT_GPU();
    t_device = GetParam().gpu ? gcommCudaDevice(0) : gcommHostDevice();
  }
  void TearDown() override { t_device = gcommHostDevice(); }
  const CompressionEntry* entry() const { return GetParam().entry; }
  Subject subject() const {
    for (const Subject& s : table_subjects())
      if (s.name == entry()->name) return s;
    return {};
  }
  std::vector<Subject> others() const {
    std::vector<Subject> o;
    for (const Subject& s : table_subjects())
      if (s.name != entry()->name) o.push_back(s);
    return o;
  }
};

TEST_P(StrategyContractOf, IssuesTheSameCollectivesOnEveryRank) {
  EXPECT_EQ(issues_the_same_collectives_on_every_rank(subject()), "");
}
TEST_P(StrategyContractOf, CountsAnUnmarkedGradientAsZero) {
  EXPECT_EQ(counts_an_unmarked_gradient_as_zero(subject()), "");
}
TEST_P(StrategyContractOf, SkipsAnInfStepAndKeepsItsState) {
  EXPECT_EQ(skips_an_inf_step_and_keeps_its_state(subject()), "");
}
TEST_P(StrategyContractOf, RoundTripsItsStateAndRefusesAnotherKinds) {
  EXPECT_EQ(round_trips_its_state(subject(), others()), "");
}
TEST_P(StrategyContractOf, CarriesItsStateAcrossWorlds) {
  EXPECT_EQ(carries_its_state_across_worlds(subject()), "");
}
TEST_P(StrategyContractOf, AllocatesNothingInAStep) {
  EXPECT_EQ(allocates_nothing_in_a_step(subject()), "");
}
TEST_P(StrategyContractOf, CompressesUnderItsContractOptions) {
  // Otherwise the rules above would hold of the wrapped all-reduce alone.
  const std::string e = on_ranks([&](int rank, comm::Communicator& comm) -> std::string {
    RankReducer rr(comm, subject());
    rr.step(inputs(rank, 0));
    const auto [kind, counters] = rr.r->compression_in_use();
    if (kind != entry()->kind || counters.empty() || counters[0].value == 0)
      return std::string(entry()->name) + " did not compress a step under its contract_options '" +
             entry()->contract_options + "'";
    return "";
  });
  EXPECT_EQ(e, "");
}
TEST_P(StrategyContractOf, RefusesAnOptionItDoesNotHave) {
  const std::string e = on_ranks([&](int, comm::Communicator& comm) -> std::string {
    const CompressionEntry* kind = entry();
    const Subject odd{kind->name, [kind](const StrategySetup& setup) {
                        OptionText options(kind->name, "no_such_option=1");
                        return kind->from_text(options, setup);
                      }};
    try {
      RankReducer rr(comm, odd);
    } catch (const Error& err) {
      if (err.status() == gcommInvalidArgument && err.message().find("no_such_option") != std::string::npos)
        return "";
      return "refused, without naming the option: " + err.message();
    }
    return "an unknown option was taken";
  });
  EXPECT_EQ(e, "");
}

std::vector<EntryOn> every_entry_on(bool gpu) {
  std::vector<EntryOn> all;
  for (const CompressionEntry* e : compression_entries()) all.push_back(EntryOn{e, gpu});
  return all;
}
std::string entry_on_name(const ::testing::TestParamInfo<EntryOn>& w) {
  return std::string(w.param.entry->name) + (w.param.gpu ? "_gpu" : "_host");
}

INSTANTIATE_TEST_SUITE_P(Host, StrategyContractOf, ::testing::ValuesIn(every_entry_on(false)), entry_on_name);
INSTANTIATE_TEST_SUITE_P(Gpu, StrategyContractOf, ::testing::ValuesIn(every_entry_on(true)), entry_on_name);

// ---- the suite's own check: fakes that each break one rule ----

enum class Defect {
  kNone,
  kExtraCallOnRank1,
  kStateMovesOnInf,
  kAllocatesInStep,
  kLoadsNothing,
  kUnmarkedIsStale
};

// Wraps the all-reduce strategy and keeps a sum of what it saw as its "state".
class Fake final : public CompressionStrategy {
 public:
  Fake(Defect d, const StrategySetup& setup) : defect_(d), allocator_(setup.allocator), rank_(setup.rank) {}
  gcommCompression_t kind() const noexcept override { return static_cast<gcommCompression_t>(990); }
  const char* name() const noexcept override { return "fake"; }
  std::vector<Counter> counters() const override { return {{"compressed_steps", steps_}}; }
  // Whole: "FAKESTAT", the sum and the step counter; shared: "FAKESHAR" and the counter.
  std::vector<uint8_t> save(StatePart part) override {
    const bool shared = part == StatePart::kShared;
    std::vector<uint8_t> out(shared ? 16 : 24);
    std::memcpy(out.data(), shared ? "FAKESHAR" : "FAKESTAT", 8);
    std::memcpy(out.data() + 8, &steps_, 8);
    if (!shared) std::memcpy(out.data() + 16, &sum_, 8);
    return out;
  }
  void load(const uint8_t* data, size_t bytes, StateOrigin origin) override {
    const bool shared = bytes == 16 && std::memcmp(data, "FAKESHAR", 8) == 0;
    require(shared || (bytes == 24 && std::memcmp(data, "FAKESTAT", 8) == 0), "not a fake state");
    if (defect_ == Defect::kLoadsNothing) return;
    std::memcpy(&steps_, data + 8, 8);
    if (!shared)
      std::memcpy(&sum_, data + 16, 8);
    else if (origin == StateOrigin::kThisRank)
      sum_ = 0;  // a newcomer's: no residual; carried, this rank's own is kept
  }
  void begin_step(const StrategyContext& ctx) override {
    if (defect_ == Defect::kExtraCallOnRank1 && rank_ == 1)
      ctx.comm.collective(comm::owned_buffers_call(comm::Collective::kBarrier, nullptr, nullptr, 0,
                                                   gcommFloat32, ctx.side.stream()));
    rest_->begin_step(ctx);
  }
  void run_bucket(size_t b, bool complete, const StrategyContext& ctx) override {
    if (defect_ == Defect::kAllocatesInStep)
      allocator_.deallocate(allocator_.allocate(256, nullptr), nullptr);
    rest_->run_bucket(b, defect_ == Defect::kUnmarkedIsStale ? true : complete, ctx);
  }
  void end_step(const StrategyContext& ctx) override {
    rest_->end_step(ctx);
    ctx.side.synchronize();
    const bool inf = *ctx.step_flag > 0.0f;
    if (!inf || defect_ == Defect::kStateMovesOnInf)
      for (const gcommTensor_t& g : ctx.grads) sum_ += static_cast<const float*>(g.data)[0];
    ++steps_;
  }

 private:
  Defect defect_;
  memory::CachingAllocator& allocator_;
  int rank_;
  double sum_ = 0;
  uint64_t steps_ = 1;  // counts as compressing from the start
};

Subject fake(Defect d) {
  return Subject{"fake", [d](const StrategySetup& setup) { return std::make_unique<Fake>(d, setup); }};
}

TEST(StrategyContract, ASoundFakeKeepsEveryRule) {
  EXPECT_EQ(issues_the_same_collectives_on_every_rank(fake(Defect::kNone)), "");
  EXPECT_EQ(counts_an_unmarked_gradient_as_zero(fake(Defect::kNone)), "");
  EXPECT_EQ(skips_an_inf_step_and_keeps_its_state(fake(Defect::kNone)), "");
  EXPECT_EQ(round_trips_its_state(fake(Defect::kNone), table_subjects()), "");
  EXPECT_EQ(allocates_nothing_in_a_step(fake(Defect::kNone)), "");
  EXPECT_EQ(carries_its_state_across_worlds(fake(Defect::kNone)), "");
}

TEST(StrategyContract, CatchesEachBrokenFake) {
  EXPECT_NE(issues_the_same_collectives_on_every_rank(fake(Defect::kExtraCallOnRank1)), "");
  EXPECT_NE(counts_an_unmarked_gradient_as_zero(fake(Defect::kUnmarkedIsStale)), "");
  EXPECT_NE(skips_an_inf_step_and_keeps_its_state(fake(Defect::kStateMovesOnInf)), "");
  EXPECT_NE(round_trips_its_state(fake(Defect::kLoadsNothing), {}), "");
  EXPECT_NE(allocates_nothing_in_a_step(fake(Defect::kAllocatesInStep)), "");
  EXPECT_NE(carries_its_state_across_worlds(fake(Defect::kLoadsNothing)), "");
}

}  // namespace
}  // namespace gradcomm::reducer
