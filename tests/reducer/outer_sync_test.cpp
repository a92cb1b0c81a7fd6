// Outer synchronization through the C API (include/gradcomm/outer_sync.h) on local
// and socket host ranks (and GPU 0 where one is present): rank 0's parameters
// everywhere at creation; after H inner steps every rank holds the same parameters,
// the DiLoCo rule applied to the ranks' average pseudo-gradient (against a double
// reference); fragments synced in turn; a wire (int8, f16) keeps the ranks
// identical; a sync overlapping tau inner steps lands mixed (streaming DiLoCo, against
// a double reference); the state's round trip continues as if never stopped, a sync
// in flight included, and a state of another shape or compression is refused;
// Inf/NaN skips a sync; bad input.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "reducer/reducer_rig.hpp"
#include "reducer/where_rig.hpp"

namespace gradcomm::test {
namespace {

using OuterSync = WhereRig;

// A rank's parameters where the communicator's device wants them.
struct Params {
  std::vector<GradMem> mem;
  std::vector<size_t> sizes;
  Params(const std::vector<size_t>& s, bool gpu) : sizes(s) {
    for (size_t n : s) mem.emplace_back(gcommFloat32, n, gpu);
  }
  std::vector<gcommTensor_t> tensors() const {
    std::vector<gcommTensor_t> t;
    for (const GradMem& m : mem) t.push_back(m.tensor());
    return t;
  }
  void set(size_t k, const std::vector<float>& v) {
    if (mem[k].gpu)
      cudaMemcpy(mem[k].data, v.data(), v.size() * 4, cudaMemcpyHostToDevice);
    else
      std::memcpy(mem[k].data, v.data(), v.size() * 4);
  }
  std::vector<float> get(size_t k) const {
    std::vector<float> v(sizes[k]);
    if (mem[k].gpu) {
      cudaDeviceSynchronize();
      cudaMemcpy(v.data(), mem[k].data, v.size() * 4, cudaMemcpyDeviceToHost);
    } else {
      std::memcpy(v.data(), mem[k].data, v.size() * 4);
    }
    return v;
  }
};

std::vector<float> values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// An inner step of rank r: every parameter moves by its own amount (a rank's data).
float inner_move(int rank, int step, size_t k, size_t i) {
  return 0.01f * static_cast<float>((rank + 1) * (step % 3 + 1)) * (static_cast<float>((k + i) % 5) - 2.0f);
}
void inner_step(Params& p, int rank, int step) {
  for (size_t k = 0; k < p.sizes.size(); ++k) {
    std::vector<float> v = p.get(k);
    for (size_t i = 0; i < v.size(); ++i) v[i] -= inner_move(rank, step, k, i);
    p.set(k, v);
  }
}

gcommOuterSyncConfig_t config(uint32_t every, uint32_t fragments = 1, const char* compression = nullptr) {
  gcommOuterSyncConfig_t c = GCOMM_OUTER_SYNC_CONFIG_INITIALIZER;
  c.sync_every = every;
  c.fragments = fragments;
  c.compression = compression;
  return c;
}

#define OS_CHECK(call)                                                                  \
  do {                                                                                  \
    if ((call) != gcommSuccess) return std::string(#call) + ": " + gcommGetLastError(); \
  } while (0)

const std::vector<size_t> kSizes = {1000, 37, 4096, 5};

// Every rank's parameters after `steps` inner steps with syncs every H, as bytes per tensor.
using Result = std::vector<std::vector<float>>;

// Rank 0's starting parameters (seeds seed, seed + 1, ...), and a rank's parameters
// before creation: rank 0's, or values of its own that the creation's broadcast replaces.
Result starting_values(unsigned seed) {
  Result start;
  for (size_t k = 0; k < kSizes.size(); ++k)
    start.push_back(values(kSizes[k], seed + static_cast<unsigned>(k)));
  return start;
}
void set_before_creation(Params& p, int rank, const Result& start) {
  for (size_t k = 0; k < kSizes.size(); ++k)
    p.set(k, rank == 0 ? start[k] : values(kSizes[k], 1000 + static_cast<unsigned>(rank)));
}

// Every rank's parameters after `steps` inner steps with config `c`, straight through
// (first) and with a checkpoint after step `stop_at` loaded into a new object (second:
// its creation broadcasts rank 0's parameters, the caller's own are put back as saved).
std::pair<std::vector<Result>, std::vector<Result>> straight_and_resumed(WhereRig& rig, int world,
                                                                         const gcommOuterSyncConfig_t& c,
                                                                         unsigned seed, int steps,
                                                                         int stop_at) {
  std::vector<Result> straight(world), resumed(world);
  for (bool stop : {false, true}) {
    rig.run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      Params p(kSizes, rig.gpu());
      for (size_t k = 0; k < kSizes.size(); ++k) p.set(k, values(kSizes[k], seed + static_cast<unsigned>(k)));
      const auto t = p.tensors();
      gcommOuterSync_t s = nullptr;
      OS_CHECK(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s));
      for (int step = 1; step <= steps; ++step) {
        inner_step(p, rank, step);
        OS_CHECK(gcommOuterSyncStep(s, stream, nullptr));
        if (!stop || step != stop_at) continue;
        size_t need = 0;
        OS_CHECK(gcommOuterSyncSaveState(s, nullptr, 0, &need));
        std::vector<uint8_t> state(need);
        OS_CHECK(gcommOuterSyncSaveState(s, state.data(), state.size(), &need));
        std::vector<std::vector<float>> saved;
        for (size_t k = 0; k < kSizes.size(); ++k) saved.push_back(p.get(k));
        OS_CHECK(gcommOuterSyncDestroy(s));
        OS_CHECK(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s));
        for (size_t k = 0; k < kSizes.size(); ++k) p.set(k, saved[k]);
        OS_CHECK(gcommOuterSyncLoadState(s, state.data(), state.size()));
        gcommOuterSyncStats_t st = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
        OS_CHECK(gcommOuterSyncGetStats(s, &st));
        if (st.inner_steps != static_cast<uint64_t>(stop_at))
          return "the loaded state's step count is " + std::to_string(st.inner_steps);
      }
      for (size_t k = 0; k < kSizes.size(); ++k) (stop ? resumed : straight)[rank].push_back(p.get(k));
      OS_CHECK(gcommOuterSyncDestroy(s));
      return "";
    });
  }
  return {straight, resumed};
}

TEST_P(OuterSync, EveryRankHoldsTheDiLoCoStepOfTheAveragePseudoGradient) {
  const int world = 3, H = 4;
  std::vector<Result> got(world);
  const Result start = starting_values(10);
  run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    Params p(kSizes, gpu());
    set_before_creation(p, rank, start);
    gcommOuterSync_t s = nullptr;
    const gcommOuterSyncConfig_t c = config(H);
    const auto t = p.tensors();
    OS_CHECK(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s));
    for (size_t k = 0; k < kSizes.size(); ++k)
      if (p.get(k) != start[k]) return "rank 0's parameters were not broadcast";
    for (int step = 1; step <= 2 * H; ++step) {
      inner_step(p, rank, step);
      int synced = -1;
      OS_CHECK(gcommOuterSyncStep(s, stream, &synced));
      if (synced != (step % H == 0 ? 1 : 0))
        return "step " + std::to_string(step) + " synced " + std::to_string(synced);
    }
    gcommOuterSyncStats_t st = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
    OS_CHECK(gcommOuterSyncGetStats(s, &st));
    const bool counted = GetParam() == Where::kSocketHost;  // the local transport counts no bytes
    if (st.inner_steps != 2 * H || st.syncs != 2 || st.skipped_syncs != 0 || st.values != 5138 ||
        (st.bytes_sent != 0) != counted)
      return "stats: " + std::to_string(st.inner_steps) + " " + std::to_string(st.syncs) + " " +
             std::to_string(st.values) + " " + std::to_string(st.bytes_sent);
    for (size_t k = 0; k < kSizes.size(); ++k) got[rank].push_back(p.get(k));
    OS_CHECK(gcommOuterSyncDestroy(s));
    return "";
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(got[r], got[0]) << "rank " << r << " differs from rank 0";
  // The reference in double: outer = start; each period, every rank moves H steps
  // from outer; delta = mean(outer - theta_r); Nesterov with 0.9, lr 0.7.
  for (size_t k = 0; k < kSizes.size(); ++k)
    for (size_t i = 0; i < kSizes[k]; ++i) {
      double outer = start[k][i], m = 0.0;
      for (int period = 0; period < 2; ++period) {
        double delta = 0.0;
        for (int r = 0; r < world; ++r) {
          double theta = outer;
          for (int step = period * H + 1; step <= (period + 1) * H; ++step)
            theta -= inner_move(r, step, k, i);
          delta += (outer - theta) / world;
        }
        m = 0.9 * m + delta;
        outer -= 0.7 * (delta + 0.9 * m);
      }
      ASSERT_NEAR(got[0][k][i], outer, 1e-5 * (1 + std::fabs(outer))) << "tensor " << k << " value " << i;
    }
}

// Streaming DiLoCo's overlap: a sync started after step 4 lands after step 6 (tau 2),
// its outer step applied to the pseudo-gradients of step 4 and mixed half and half
// with the parameters the two steps since made (each rank its own: they differ).
TEST_P(OuterSync, AnOverlappedSyncLandsTauStepsLaterMixedWithTheStepsSince) {
  const int world = 3, H = 4, tau = 2, steps = 2 * H + tau;
  std::vector<Result> got(world);
  const Result start = starting_values(60);
  run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    Params p(kSizes, gpu());
    set_before_creation(p, rank, start);
    gcommOuterSyncConfig_t c = config(H);
    c.overlap_steps = tau;
    c.mix = 0.5f;
    const auto t = p.tensors();
    gcommOuterSync_t s = nullptr;
    OS_CHECK(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s));
    for (int step = 1; step <= steps; ++step) {
      inner_step(p, rank, step);
      int synced = -1;
      OS_CHECK(gcommOuterSyncStep(s, stream, &synced));
      if (synced != (step > tau && (step - tau) % H == 0 ? 1 : 0))
        return "step " + std::to_string(step) + " applied " + std::to_string(synced);
    }
    gcommOuterSyncStats_t st = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
    OS_CHECK(gcommOuterSyncGetStats(s, &st));
    if (st.syncs != 2 || st.skipped_syncs != 0) return "stats: " + std::to_string(st.syncs) + " syncs";
    for (size_t k = 0; k < kSizes.size(); ++k) got[rank].push_back(p.get(k));
    OS_CHECK(gcommOuterSyncDestroy(s));
    return "";
  });
  // The reference in double, rank by rank: the pseudo-gradients of the step a sync
  // starts on, the update tau steps later, param = 0.5 * param + 0.5 * outer.
  for (size_t k = 0; k < kSizes.size(); ++k)
    for (size_t i = 0; i < kSizes[k]; ++i) {
      std::vector<double> theta(world, start[k][i]);
      double outer = start[k][i], m = 0.0, delta = 0.0;
      for (int step = 1; step <= steps; ++step) {
        for (int r = 0; r < world; ++r) theta[r] -= inner_move(r, step, k, i);
        if (step > tau && (step - tau) % H == 0) {
          m = 0.9 * m + delta;
          outer -= 0.7 * (delta + 0.9 * m);
          for (int r = 0; r < world; ++r) theta[r] = 0.5 * theta[r] + 0.5 * outer;
        }
        if (step % H == 0) {
          delta = 0.0;
          for (int r = 0; r < world; ++r) delta += (outer - theta[r]) / world;
        }
      }
      for (int r = 0; r < world; ++r)
        ASSERT_NEAR(got[r][k][i], theta[r], 1e-5 * (1 + std::fabs(theta[r])))
            << "rank " << r << ", tensor " << k << " value " << i;
    }
}

// A checkpoint taken while a sync is in flight (started after step 4, landing after
// step 6): the loaded object lands it on step 6 as the first would have.
TEST_P(OuterSync, AStateSavedWithASyncInFlightLandsItOnItsStep) {
  gcommOuterSyncConfig_t c = config(4, 2, "int8:block_size=32");  // fragments start at 2 and 4
  c.overlap_steps = 2;
  const auto [straight, resumed] = straight_and_resumed(*this, 2, c, 80, 9, 5);
  for (size_t r = 0; r < straight.size(); ++r) EXPECT_EQ(resumed[r], straight[r]) << "rank " << r;
}

TEST_P(OuterSync, FragmentsSyncInTurnAndAWireKeepsTheRanksIdentical) {
  const int world = 2, H = 4;
  for (const char* compression :
       {static_cast<const char*>(nullptr), "int8:block_size=32", "fp4:block_size=32"}) {
    std::vector<Result> end(world), mid(world);
    run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      Params p(kSizes, gpu());
      for (size_t k = 0; k < kSizes.size(); ++k) p.set(k, values(kSizes[k], 20 + static_cast<unsigned>(k)));
      gcommOuterSync_t s = nullptr;
      const gcommOuterSyncConfig_t c = config(H, 2, compression);
      const auto t = p.tensors();
      OS_CHECK(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s));
      for (int step = 1; step <= H; ++step) {
        inner_step(p, rank, step);
        OS_CHECK(gcommOuterSyncStep(s, stream, nullptr));
        if (step == 2)
          for (size_t k = 0; k < kSizes.size(); ++k) mid[rank].push_back(p.get(k));
      }
      for (size_t k = 0; k < kSizes.size(); ++k) end[rank].push_back(p.get(k));
      OS_CHECK(gcommOuterSyncDestroy(s));
      return "";
    });
    const std::string what = compression != nullptr ? compression : "f32";
    // Fragments by values: 1000 + 37 + 4096 passes half of 5138 at tensor 2, so
    // fragment 0 is tensors 0..2 and fragment 1 is tensor 3.
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(mid[1][k], mid[0][k]) << what << ": fragment 0 synced at step 2, tensor " << k;
      EXPECT_NE(end[1][k], end[0][k])
          << what << ": fragment 0 apart again after two inner steps, tensor " << k;
    }
    EXPECT_NE(mid[1][3], mid[0][3]) << what << ": fragment 1 not synced at step 2";
    EXPECT_EQ(end[1][3], end[0][3]) << what << ": fragment 1 synced at step 4";
  }
}

TEST_P(OuterSync, AStatesRoundTripContinuesAsIfNeverStopped) {
  // A checkpoint mid-period (H 2, after step 3), then a new object loads it.
  const auto [straight, resumed] =
      straight_and_resumed(*this, 2, config(2, 1, "int8:block_size=32"), 30, 6, 3);
  for (size_t r = 0; r < straight.size(); ++r) EXPECT_EQ(resumed[r], straight[r]) << "rank " << r;
}

TEST_P(OuterSync, AStateOfAnotherShapeOrWireIsRefusedChangingNothing) {
  run(1, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
    Params p(kSizes, gpu()), q({1000, 37, 4096, 6}, gpu());
    for (size_t k = 0; k < kSizes.size(); ++k) p.set(k, values(kSizes[k], 40));
    const auto tp = p.tensors(), tq = q.tensors();
    gcommOuterSync_t a = nullptr, b = nullptr, c = nullptr, d = nullptr, h = nullptr, o = nullptr;
    const gcommOuterSyncConfig_t plain = config(2), int8 = config(2, 1, "int8"), two = config(2, 2, "int8");
    gcommOuterSyncConfig_t f16 = config(2), overlapped = config(2, 1, "int8");
    f16.wire_dtype = gcommFloat16;
    overlapped.overlap_steps = 1;
    OS_CHECK(gcommOuterSyncCreate(comm, tp.data(), tp.size(), &int8, &a));
    OS_CHECK(gcommOuterSyncCreate(comm, tq.data(), tq.size(), &int8, &b));
    OS_CHECK(gcommOuterSyncCreate(comm, tp.data(), tp.size(), &plain, &c));
    OS_CHECK(gcommOuterSyncCreate(comm, tp.data(), tp.size(), &two, &d));
    OS_CHECK(gcommOuterSyncCreate(comm, tp.data(), tp.size(), &f16, &h));
    OS_CHECK(gcommOuterSyncCreate(comm, tp.data(), tp.size(), &overlapped, &o));
    for (int step = 0; step < 2; ++step) OS_CHECK(gcommOuterSyncStep(a, stream, nullptr));
    size_t need = 0;
    OS_CHECK(gcommOuterSyncSaveState(a, nullptr, 0, &need));
    std::vector<uint8_t> state(need);
    OS_CHECK(gcommOuterSyncSaveState(a, state.data(), state.size(), &need));
    struct Case {
      gcommOuterSync_t target;
      const char* needle;
    } cases[] = {
        {b, "this object's 6"}, {c, "wire 'int8'"}, {d, "fragments"}, {h, "dtype 1"}, {o, "overlap_steps"}};
    for (const Case& k : cases) {
      if (gcommOuterSyncLoadState(k.target, state.data(), state.size()) != gcommInvalidArgument ||
          std::string(gcommGetLastError()).find(k.needle) == std::string::npos)
        return std::string("expected '") + k.needle + "': " + gcommGetLastError();
      gcommOuterSyncStats_t st = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
      OS_CHECK(gcommOuterSyncGetStats(k.target, &st));
      if (st.inner_steps != 0) return "a refused load changed the step count";
    }
    std::vector<uint8_t> cut(state.begin(), state.end() - 1);
    if (gcommOuterSyncLoadState(a, cut.data(), cut.size()) != gcommInvalidArgument)
      return "a cut state loaded";
    std::vector<uint8_t> garbage(64, 7);
    if (gcommOuterSyncLoadState(a, garbage.data(), garbage.size()) != gcommInvalidArgument ||
        std::string(gcommGetLastError()).find("wrong magic") == std::string::npos)
      return "garbage was not refused";
    // A state whose second fragment's compression state its reducer refuses (its
    // magic broken): the first fragment's, loaded before, is put back as it was.
    auto save = [](gcommOuterSync_t s, std::vector<uint8_t>* out) -> std::string {
      size_t n = 0;
      OS_CHECK(gcommOuterSyncSaveState(s, nullptr, 0, &n));
      out->resize(n);
      OS_CHECK(gcommOuterSyncSaveState(s, out->data(), out->size(), &n));
      return "";
    };
    gcommOuterSync_t e = nullptr;
    Params r(kSizes, gpu());
    for (size_t k = 0; k < kSizes.size(); ++k) r.set(k, values(kSizes[k], 41));
    const auto tr = r.tensors();
    OS_CHECK(gcommOuterSyncCreate(comm, tr.data(), tr.size(), &two, &e));
    for (int step = 0; step < 2; ++step) {
      inner_step(p, 0, step);
      inner_step(r, 1, step);
      OS_CHECK(gcommOuterSyncStep(d, stream, nullptr));
      OS_CHECK(gcommOuterSyncStep(e, stream, nullptr));
    }
    std::vector<uint8_t> theirs, mine, after;
    std::string err;
    if (!(err = save(d, &theirs)).empty() || !(err = save(e, &mine)).empty()) return err;
    const std::string magic = "GCQINT8";
    const auto second = std::search(std::search(theirs.begin(), theirs.end(), magic.begin(), magic.end()) + 1,
                                    theirs.end(), magic.begin(), magic.end());
    if (second == theirs.end()) return "the state has no second int8 state";
    *second ^= 0xff;
    if (gcommOuterSyncLoadState(e, theirs.data(), theirs.size()) != gcommInvalidArgument)
      return "a state with a broken fragment state loaded";
    if (!(err = save(e, &after)).empty()) return err;
    if (after != mine) return "a refused load changed the first fragment's compression state";
    // A state of the format before overlap_steps ('1') is named as such.
    std::vector<uint8_t> old_format = state;
    old_format[7] = '1';
    if (gcommOuterSyncLoadState(a, old_format.data(), old_format.size()) != gcommInvalidArgument ||
        std::string(gcommGetLastError()).find("older format") == std::string::npos)
      return std::string("an old state: ") + gcommGetLastError();
    for (gcommOuterSync_t s : {a, b, c, d, e, h, o}) OS_CHECK(gcommOuterSyncDestroy(s));
    return "";
  });
}

TEST_P(OuterSync, AnInfOrNaNAverageSkipsTheSyncAndLeavesTheParameters) {
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    Params p({64}, gpu());
    p.set(0, values(64, 50));
    const gcommOuterSyncConfig_t c = config(1);
    const auto t = p.tensors();
    gcommOuterSync_t s = nullptr;
    OS_CHECK(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s));
    std::vector<float> v = p.get(0);
    if (rank == 1) v[5] = std::nanf("");
    p.set(0, v);
    OS_CHECK(gcommOuterSyncStep(s, stream, nullptr));
    gcommOuterSyncStats_t st = GCOMM_OUTER_SYNC_STATS_INITIALIZER;
    OS_CHECK(gcommOuterSyncGetStats(s, &st));
    if (st.skipped_syncs != 1 || st.syncs != 0) return "the NaN sync was not skipped";
    const std::vector<float> after = p.get(0);
    if (std::memcmp(after.data(), v.data(), v.size() * 4) != 0) return "a skipped sync wrote the parameters";
    OS_CHECK(gcommOuterSyncDestroy(s));
    return "";
  });
}

TEST_P(OuterSync, BadInputIsRefusedWithTheReason) {
  run(1, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    Params p(kSizes, gpu());
    GradMem half(gcommFloat16, 8, gpu());
    const auto t = p.tensors();
    gcommOuterSync_t s = nullptr;
    auto expect = [&](gcommStatus_t got, const char* needle) -> std::string {
      if (got == gcommInvalidArgument && std::string(gcommGetLastError()).find(needle) != std::string::npos &&
          s == nullptr)
        return "";
      return std::string("expected '") + needle + "': " + gcommGetStatusString(got) + ": " +
             gcommGetLastError();
    };
    std::string e;
    gcommOuterSyncConfig_t c = config(4, 5);
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s), "fragments 5")).empty())
      return e;
    c = config(8, 5);
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s), "more than the 4")).empty())
      return e;
    c = config(4);
    c.outer_lr = 0.0f;
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s), "outer_lr")).empty()) return e;
    c = config(4);
    c.outer_momentum = 1.0f;
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s), "outer_momentum")).empty())
      return e;
    c = config(8, 2);
    c.overlap_steps = 5;
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s),
                     "overlap_steps 5 must be at most"))
             .empty())
      return e;
    c = config(8);
    c.overlap_steps = 1;
    c.mix = 1.0f;
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s), "mix must be in")).empty())
      return e;
    c = config(4, 1, "int9");
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), t.size(), &c, &s), "int9")).empty()) return e;
    c = config(4);
    const gcommTensor_t h = half.tensor();
    if (!(e = expect(gcommOuterSyncCreate(comm, &h, 1, &c, &s), "f32 parameters")).empty()) return e;
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), 0, &c, &s), "at least one")).empty()) return e;
    if (!(e = expect(gcommOuterSyncCreate(comm, t.data(), SIZE_MAX / 2, &c, &s), "num_params")).empty())
      return e;
    if (gcommOuterSyncStep(nullptr, nullptr, nullptr) != gcommInvalidArgument) return "a NULL handle stepped";
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(, OuterSync,
                         ::testing::Values(Where::kLocalHost, Where::kSocketHost, Where::kLocalGpu),
                         where_name);

}  // namespace
}  // namespace gradcomm::test
