// Straggler attribution: the rules on made-up accounts (a late rank in each
// phase, a slow link, noise below the threshold, a window's majority, clock
// offsets), and real reducers on four host ranks (threads) with one rank made
// late in its compute, data loading or optimizer step, and none: the report
// names the rank and the phase, and never names one when none is late. The link
// phase needs a transport that tells its waits (socket, shm): the wire's charge
// is tested in tests/comm/socket/socket_links_test.cpp, the lab run proves the
// whole (docs/benchmarks.md).
#include <cstdlib>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "comm/transport.hpp"
#include "reducer/reducer_rig.hpp"
#include "reducer/straggler_attribution.hpp"
#include "reducer/straggler_monitor.hpp"

namespace gradcomm::test {
namespace {

using reducer::attribute_step;
using reducer::attribute_window;
using reducer::AttributionRules;
using reducer::LatePhase;
using reducer::RankStep;
using reducer::StepVerdict;

// Four ranks that did the same step in 100 ms: optimizer 5 ms, data 10 ms,
// gradients ready at 60 ms; each waited 1 ms on every peer.
std::vector<RankStep> even_step() {
  std::vector<RankStep> s(4);
  for (int r = 0; r < 4; ++r) {
    s[r].origin_us = 1e6 + r;
    s[r].optimizer_done_us = 5000;
    s[r].forward_us = 15000;
    s[r].ready_us = 60000;
    s[r].end_us = 100000;
    s[r].top_peer = (r + 1) % 4;
    s[r].top_wait_us = 1000;
    s[r].typical_wait_us = 900;
  }
  return s;
}

TEST(StragglerAttribution, NobodyIsLateInAnEvenStep) {
  const std::vector<RankStep> s = even_step();
  EXPECT_EQ(attribute_step(s.data(), 4, {}).rank, -1);
  EXPECT_EQ(attribute_step(s.data(), 1, {}).rank, -1);  // one rank: nobody to wait for it
}

TEST(StragglerAttribution, ALateRankIsNamedWithThePhaseItLostTheTimeIn) {
  struct Case {
    LatePhase phase;
    double RankStep::*mark;  // the marks from this one on move 200 ms later
  };
  for (const Case c :
       {Case{LatePhase::kOptimizer, &RankStep::optimizer_done_us},
        Case{LatePhase::kData, &RankStep::forward_us}, Case{LatePhase::kCompute, &RankStep::ready_us}}) {
    std::vector<RankStep> s = even_step();
    bool later = false;
    for (double RankStep::*m : {&RankStep::optimizer_done_us, &RankStep::forward_us, &RankStep::ready_us}) {
      later = later || m == c.mark;
      if (later) s[2].*m += 200000;
    }
    for (RankStep& r : s) r.end_us += 200000;  // everyone waited for rank 2
    const StepVerdict v = attribute_step(s.data(), 4, {});
    EXPECT_EQ(v.rank, 2) << reducer::late_phase_name(c.phase);
    EXPECT_EQ(v.phase, c.phase) << reducer::late_phase_name(c.phase);
    EXPECT_NEAR(v.late_us, 200000, 1) << reducer::late_phase_name(c.phase);
  }
}

// Without the framework's marks the time before the gradients were ready is compute.
TEST(StragglerAttribution, WithoutMarksALateRankIsLateInCompute) {
  std::vector<RankStep> s = even_step();
  for (RankStep& r : s) r.optimizer_done_us = r.forward_us = -1;
  s[1].ready_us += 50000;
  const StepVerdict v = attribute_step(s.data(), 4, {});
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.phase, LatePhase::kCompute);
}

// Gradients ready on time, but the other ranks waited on rank 3's bytes: its link.
TEST(StragglerAttribution, ARankEveryoneWaitedOnWithGradientsOnTimeHasASlowLink) {
  std::vector<RankStep> s = even_step();
  for (int r = 0; r < 3; ++r) {
    s[r].top_peer = 3;
    s[r].top_wait_us = 80000;
  }
  s[3].top_peer = 0;  // rank 3 waited on everyone alike (its own link is slow both ways)
  s[3].top_wait_us = 40000;
  s[3].typical_wait_us = 39000;
  const StepVerdict v = attribute_step(s.data(), 4, {});
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.phase, LatePhase::kLink);
  EXPECT_NEAR(v.late_us, 80000 - 900, 1);
  // A single rank that waited on rank 3 is no majority.
  s[1].top_peer = s[2].top_peer = 0;
  EXPECT_NE(attribute_step(s.data(), 4, {}).rank, 3);
}

// Two ranks share their one link: each waited on the other for the whole transfer
// (a slow link, or a large bucket), and neither has another peer to compare with,
// so no rank's link can be named (the lab at 2 ranks and 100 Mbit named rank 1).
TEST(StragglerAttribution, TwoRanksOnOneSlowLinkNameNobody) {
  std::vector<RankStep> s = even_step();
  s.resize(2);
  for (int r = 0; r < 2; ++r) {
    s[r].end_us = 4000000;
    s[r].top_peer = 1 - r;
    s[r].top_wait_us = 3800000 + 1000 * r;
    s[r].typical_wait_us = 0;  // no other peer
  }
  EXPECT_EQ(attribute_step(s.data(), 2, {}).rank, -1);
  s[1].ready_us = 1000000;  // a late rank is still named at two ranks
  EXPECT_EQ(attribute_step(s.data(), 2, {}).rank, 1);
}

// The ranks met before backward (the wrapper's buffer broadcast before forward):
// the others waited there for rank 1, whose batch was late, so every rank's
// gradients were ready together. Its forward's start still shows it, in data.
TEST(StragglerAttribution, ALateRankWaitedForBeforeBackwardIsNamedWhereItWasLate) {
  std::vector<RankStep> s = even_step();
  s[1].forward_us += 200000;
  for (RankStep& r : s) {
    r.ready_us += 200000;  // everyone waited in the meeting
    r.end_us += 200000;
  }
  const StepVerdict v = attribute_step(s.data(), 4, {});
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.phase, LatePhase::kData);
  EXPECT_NEAR(v.late_us, 200000, 1);
}

// Below max(min_late_us, a tenth of the step) is noise.
TEST(StragglerAttribution, LatenessBelowTheThresholdIsNoise) {
  std::vector<RankStep> s = even_step();
  s[0].ready_us += 9000;  // 9 ms of a 100 ms step
  EXPECT_EQ(attribute_step(s.data(), 4, {}).rank, -1);
  AttributionRules strict;
  strict.min_late_us = 1000;
  strict.step_fraction = 0.05;
  EXPECT_EQ(attribute_step(s.data(), 4, strict).rank, 0);
  for (RankStep& r : s) r.end_us = 1e6;  // a 1 s step: 10% is 100 ms
  s[0].ready_us += 50000;
  EXPECT_EQ(attribute_step(s.data(), 4, {}).rank, -1);
}

TEST(StragglerAttribution, AWindowNamesTheRankLateOnMostOfItsSteps) {
  const StepVerdict late2{2, 200000, LatePhase::kData}, late1{1, 30000, LatePhase::kCompute}, none{};
  std::vector<StepVerdict> steps = {late2, late2, none, late2, late1, late2, late2, none, late2, late2};
  reducer::WindowVerdict w = attribute_window(steps, {});
  EXPECT_EQ(w.rank, 2);
  EXPECT_EQ(w.late_steps, 7);
  EXPECT_EQ(w.steps, 10);
  EXPECT_EQ(w.phase, LatePhase::kData);
  EXPECT_DOUBLE_EQ(w.late_us, 200000);
  // Half is not most.
  steps = {late2, late2, none, late1, late2, none, late2, none, none, none};
  EXPECT_EQ(attribute_window(steps, {}).rank, -1);
  EXPECT_EQ(attribute_window({}, {}).rank, -1);
}

TEST(StragglerAttribution, ClockOffsetsAreTheMedianDifferenceOfTheOrigins) {
  // Two ranks, three steps; rank 1's clock is 500 us ahead, one origin off by 40.
  std::vector<RankStep> all(6);
  const double origins0[] = {100, 200, 300}, origins1[] = {600, 740, 800};
  for (int k = 0; k < 3; ++k) {
    all[k].origin_us = origins0[k];
    all[3 + k].origin_us = origins1[k];
  }
  const std::vector<double> off = reducer::clock_offsets_us(all, 2, 3);
  EXPECT_DOUBLE_EQ(off[0], 0);
  EXPECT_DOUBLE_EQ(off[1], 500);
}

TEST(NonFiniteAttribution, TheRankWhoseOwnGradientWasNonFiniteIsTheSource) {
  // Three ranks, four steps: rank 1's gradient 5 on steps 0, 2, 3 (alone on 0
  // and 3); on step 2 every rank (an overflow everywhere), rank 0 at gradient 2.
  std::vector<RankStep> all(12);
  auto at = [&](int r, int k) -> RankStep& { return all[static_cast<size_t>(r * 4 + k)]; };
  at(1, 0).first_nonfinite = at(1, 2).first_nonfinite = at(1, 3).first_nonfinite = 5;
  at(0, 2).first_nonfinite = 2;
  at(2, 2).first_nonfinite = 2;
  const reducer::NonFiniteVerdict v = reducer::attribute_nonfinite(all, 3, 4);
  EXPECT_EQ(v.steps, 3);
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.grad, 5);
  EXPECT_EQ(v.source_steps, 3);
  EXPECT_EQ(v.alone_steps, 2);
  EXPECT_EQ(reducer::attribute_nonfinite(std::vector<RankStep>(12), 3, 4).rank, -1);
}

// A transport whose waits the test sets.
class WaitsTransport final : public comm::Transport {
 public:
  std::vector<uint64_t> ns = std::vector<uint64_t>(3, 0);
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 3; }
  gcommDevice_t device() const noexcept override { return gcommHostDevice(); }
  gcommTransport_t kind() const noexcept override { return gcommTransportSocket; }
  void run(const comm::CollectiveArgs&) override {}
  gcommStatus_t poll_async_error(std::string&) noexcept override { return gcommSuccess; }
  void abort() noexcept override {}
  bool waited_on_ns(int q, uint64_t& out) const noexcept override {
    out = ns[static_cast<size_t>(q)];
    return true;
  }
};

// Waits during backward follow uneven compute (each bucket's collective waits
// for a slightly slower rank): only those after backward ended are the link's.
TEST(StragglerMonitor, OnlyWaitsAfterBackwardEndedCountForTheLink) {
  WaitsTransport t;
  reducer::StragglerMonitor m(0, 3, 1, {});
  m.begin_step();
  t.ns[1] += 50'000'000;  // 50 ms waiting on rank 1 while backward ran
  m.backward_done(t);
  t.ns[2] += 3'000'000;  // 3 ms on rank 2 after it
  t.ns[1] += 1'000'000;
  ASSERT_TRUE(m.end_step(t));
  const RankStep& a = m.accounts().back();
  EXPECT_EQ(a.top_peer, 2);
  EXPECT_NEAR(a.top_wait_us, 3000, 1e-6);
  EXPECT_NEAR(a.typical_wait_us, 1000, 1e-6);
}

// ---- real reducers --------------------------------------------------------------

// Four host ranks as threads on the local transport; a window of 4 steps (the
// first synced step agrees the settings, so the windows are steps 2-5 and 6-9);
// late is 20 ms or more, and the late rank sleeps 60 ms a step.
class Stragglers : public ReducerRig {
 protected:
  void SetUp() override {
    setenv("GRADCOMM_STRAGGLER_WINDOW", "4", 1);
    setenv("GRADCOMM_STRAGGLER_MIN_MS", "20", 1);
    ReducerRig::SetUp();
  }
  void TearDown() override {
    unsetenv("GRADCOMM_STRAGGLER_WINDOW");
    unsetenv("GRADCOMM_STRAGGLER_MIN_MS");
  }

  enum class Late { kNobody, kOptimizer, kData, kCompute };

  // 9 synced steps with marks; rank `who` sleeps in `late`. Every rank's last report.
  std::vector<gcommStragglerReport_t> train(int who, Late late) {
    std::vector<gcommStragglerReport_t> reports(4);
    auto comms = make_comms(4);
    run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      GradMem g(gcommFloat32, 4096, gpu());
      std::vector<gcommTensor_t> t = {g.tensor()};
      gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
      gcommReducer_t r = nullptr;
      RIG_CHECK(gcommReducerCreate(comm, t.data(), t.size(), &c, &r));
      auto nap = [&](Late where) {
        if (rank == who && late == where) std::this_thread::sleep_for(std::chrono::milliseconds(60));
      };
      for (int step = 1; step <= 9; ++step) {
        nap(Late::kOptimizer);
        RIG_CHECK(gcommReducerNoteStepMark(r, gcommStepMarkOptimizerDone));
        nap(Late::kData);
        RIG_CHECK(gcommReducerNoteStepMark(r, gcommStepMarkForwardStart));
        nap(Late::kCompute);
        RIG_CHECK(gcommReducerBeginStep(r, 1));
        RIG_CHECK(gcommReducerMarkReady(r, 0, stream));
        RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
      }
      reports[rank] = GCOMM_STRAGGLER_REPORT_INITIALIZER;
      RIG_CHECK(gcommReducerGetStragglerReport(r, &reports[rank]));
      RIG_CHECK(gcommReducerDestroy(r));
      return "";
    });
    return reports;
  }
};

TEST_P(Stragglers, TheLateRankAndItsPhaseAreNamedAlikeOnEveryRank) {
  const struct {
    int who;
    Late late;
    gcommLatePhase_t phase;
  } cases[] = {{2, Late::kCompute, gcommLateCompute},
               {1, Late::kData, gcommLateData},
               {3, Late::kOptimizer, gcommLateOptimizer}};
  for (const auto& c : cases) {
    const std::vector<gcommStragglerReport_t> reports = train(c.who, c.late);
    for (int r = 0; r < 4; ++r) {
      const gcommStragglerReport_t& s = reports[r];
      EXPECT_EQ(s.windows, 2u) << "rank " << r;
      EXPECT_EQ(s.first_step, 6u);
      EXPECT_EQ(s.last_step, 9u);
      EXPECT_EQ(s.late_rank, c.who) << "rank " << r << ", phase " << c.phase;
      EXPECT_EQ(s.phase, c.phase) << "rank " << r;
      EXPECT_GE(s.late_steps, 3);
      EXPECT_EQ(s.window_steps, 4);
      EXPECT_GT(s.late_ms, 40);
      EXPECT_LT(s.late_ms, 1000);
    }
  }
}

TEST_P(Stragglers, NobodyIsNamedWhenNobodyIsLate) {
  for (const gcommStragglerReport_t& s : train(-1, Late::kNobody)) {
    EXPECT_EQ(s.windows, 2u);
    EXPECT_EQ(s.named_windows, 0u);
    EXPECT_EQ(s.late_rank, -1);
    // One process: one clock; the origins differ by the collective's exit skew.
    EXPECT_LT(std::abs(s.clock_offset_us), 20000);
  }
}

// Rank 1's gradient 1 holds a NaN from step 6 on, and on step 9 every rank's
// gradient 0 is Inf: the second window (6-9) names rank 1 and gradient 1 (alone
// on three steps), on every rank; the first (2-5) names nobody.
TEST_P(Stragglers, TheRankAndGradientThatFirstWentNonFiniteAreNamed) {
  std::vector<gcommNonFiniteReport_t> reports(4), first(4);
  auto comms = make_comms(4);
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::mt19937 rng(40 + rank);
    std::vector<GradMem> g;
    std::vector<gcommTensor_t> t;
    for (int i = 0; i < 2; ++i) {
      g.emplace_back(gcommFloat32, 3000, gpu());
      t.push_back(g.back().tensor());
    }
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    c.bucket_cap_bytes = 12000;  // a bucket each
    c.first_bucket_bytes = 12000;
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, t.data(), t.size(), &c, &r));
    for (int step = 1; step <= 9; ++step) {
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t i : {1, 0}) {  // backward order: the last one first
        TypedBuffer b = random_buffer(rng, gcommFloat32, 3000);
        if (rank == 1 && i == 1 && step >= 6) b.set(1234, std::nanf(""));
        if (i == 0 && step == 9) b.set(0, std::numeric_limits<float>::infinity());
        g[i].upload(b, stream);
        RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      }
      RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
      if (step == 5) {
        first[rank] = GCOMM_NONFINITE_REPORT_INITIALIZER;
        RIG_CHECK(gcommReducerGetNonFiniteReport(r, &first[rank]));
      }
    }
    reports[rank] = GCOMM_NONFINITE_REPORT_INITIALIZER;
    RIG_CHECK(gcommReducerGetNonFiniteReport(r, &reports[rank]));
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(first[r].windows, 1u);
    EXPECT_EQ(first[r].nonfinite_steps, 0);
    EXPECT_EQ(first[r].source_rank, -1);
    const gcommNonFiniteReport_t& s = reports[r];
    EXPECT_EQ(s.windows, 2u) << "rank " << r;
    EXPECT_EQ(s.first_step, 6u);
    EXPECT_EQ(s.nonfinite_steps, 4) << "rank " << r;
    EXPECT_EQ(s.source_rank, 1) << "rank " << r;
    EXPECT_EQ(s.source_grad, 1) << "rank " << r;
    EXPECT_EQ(s.source_steps, 4) << "rank " << r;
    EXPECT_EQ(s.alone_steps, 3) << "rank " << r;
  }
}

// Each rank reads its own environment; a window is an all-gather inside
// finalize, so the ranks take rank 0's (4) at the first synced step whatever
// theirs says (0: off; 3). Before, rank 2 would have all-gathered at step 3
// while the others reduced step 4's bucket.
TEST_P(Stragglers, EveryRankTakesRankZerosWindow) {
  std::vector<gcommStragglerReport_t> reports(4);
  std::mutex env;
  auto comms = make_comms(4);
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    GradMem g(gcommFloat32, 256, gpu());
    std::vector<gcommTensor_t> t = {g.tensor()};
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    gcommReducer_t r = nullptr;
    {
      std::lock_guard<std::mutex> lock(env);  // the settings are read at creation
      setenv("GRADCOMM_STRAGGLER_WINDOW", rank == 0 ? "4" : rank == 1 ? "0" : "3", 1);
      RIG_CHECK(gcommReducerCreate(comm, t.data(), t.size(), &c, &r));
      setenv("GRADCOMM_STRAGGLER_WINDOW", "4", 1);
    }
    for (int step = 1; step <= 9; ++step) {
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      RIG_CHECK(gcommReducerMarkReady(r, 0, stream));
      RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
    }
    reports[rank] = GCOMM_STRAGGLER_REPORT_INITIALIZER;
    RIG_CHECK(gcommReducerGetStragglerReport(r, &reports[rank]));
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(reports[r].windows, 2u) << "rank " << r;
    EXPECT_EQ(reports[r].window_steps, 4) << "rank " << r;
    EXPECT_EQ(reports[r].last_step, 9u) << "rank " << r;
  }
}

TEST_P(Stragglers, BadArgumentsAreRefused) {
  auto comms = make_comms(1);
  run(comms, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    GradMem g(gcommFloat32, 16, gpu());
    std::vector<gcommTensor_t> t = {g.tensor()};
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, t.data(), t.size(), &c, &r));
    std::string e;
    if (gcommReducerNoteStepMark(r, static_cast<gcommStepMark_t>(7)) != gcommInvalidArgument ||
        std::string(gcommGetLastError()).find("gcommStepMark_t") == std::string::npos)
      e = std::string("mark 7: ") + gcommGetLastError();
    if (gcommReducerNoteStepMark(nullptr, gcommStepMarkForwardStart) != gcommInvalidArgument)
      e += "; a NULL reducer was taken";
    if (gcommReducerGetStragglerReport(r, nullptr) != gcommInvalidArgument) e += "; a NULL report was taken";
    if (gcommReducerGetNonFiniteReport(r, nullptr) != gcommInvalidArgument) e += "; a NULL report was taken";
    gcommNonFiniteReport_t bare{};
    if (gcommReducerGetNonFiniteReport(r, &bare) != gcommInvalidArgument)
      e += "; a headerless report was taken";
    gcommStragglerReport_t old{};  // no header: refused, not written past
    if (gcommReducerGetStragglerReport(r, &old) != gcommInvalidArgument)
      e += "; a headerless report was taken";
    gcommStragglerReport_t s = GCOMM_STRAGGLER_REPORT_INITIALIZER;
    RIG_CHECK(gcommReducerGetStragglerReport(r, &s));
    if (s.windows != 0 || s.late_rank != -1) e += "; a report before any window";
    RIG_CHECK(gcommReducerDestroy(r));
    return e;
  });
}

INSTANTIATE_TEST_SUITE_P(Devices, Stragglers, ::testing::Values(RigDevice::kHost, RigDevice::kGpu), rig_name);

}  // namespace
}  // namespace gradcomm::test
